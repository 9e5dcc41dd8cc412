// The artifacts of a session: each version with its type and size, a
// preview (text, Markdown, JSON, images) and a download. The bytes are
// fetched with the API key and shown from memory (a blob: URL for images),
// never by pointing the page at the API, so no key goes in a URL.

import { api, enc, fetchBlob } from '../api.js';
import { h, replace, code, pretty, fmtBytes, time, chip, errorBox, busy } from '../dom.js';
import { render as markdown } from '../markdown.js';

// Larger artifacts are offered for download only.
const maxPreviewBytes = 2 << 20;

function kindOf(a) {
  const t = (a.content_type || '').toLowerCase();
  const name = a.name.toLowerCase();
  if (t.startsWith('image/') && !t.includes('svg')) return 'image';
  if (t.includes('markdown') || name.endsWith('.md') || name.endsWith('.markdown')) return 'markdown';
  if (t.includes('json') || name.endsWith('.json')) return 'json';
  if (t.startsWith('text/') || t.includes('xml') || t.includes('javascript') || t.includes('yaml') || t.includes('svg')) return 'text';
  return '';
}

export async function artifactsTab(el, scope, sessionId) {
  const list = await api.get(`/v1/sessions/${enc(sessionId)}/artifacts`, undefined, { signal: scope.signal });
  const ids = list.data.map((a) => a.id).join(',');
  if (el.dataset.ids === ids && el.childElementCount) return; // unchanged: keep an open preview
  el.dataset.ids = ids;
  if (!list.data.length) {
    replace(el, h('p', { class: 'muted' }, 'No artifacts yet: the agent delivers them with its finish tool.'));
    return;
  }
  const preview = h('div', { class: 'preview', id: 'artifact-preview' });
  const urls = [];
  scope.onDispose(() => urls.forEach((u) => URL.revokeObjectURL(u)));

  const show = async (a, button) => {
    replace(preview, h('p', { class: 'muted' }, `Loading ${a.name}…`));
    try {
      const blob = await busy(button, fetchBlob(`/v1/artifacts/${enc(a.id)}/content`, scope.signal));
      const kind = kindOf(a);
      let body;
      if (kind === 'image') {
        const u = URL.createObjectURL(blob);
        urls.push(u);
        body = h('img', { src: u, alt: a.name, class: 'artifact-image' });
      } else if (kind === 'markdown') {
        body = markdown(await blob.text());
      } else if (kind === 'json') {
        const text = await blob.text();
        try {
          body = code(pretty(JSON.parse(text)));
        } catch {
          body = code(text);
        }
      } else {
        body = code(await blob.text());
      }
      replace(preview, h('h3', null, `${a.name} v${a.version}`), body);
    } catch (err) {
      replace(preview, errorBox(err));
    }
  };

  const download = async (a, button) => {
    try {
      const blob = await busy(button, fetchBlob(`/v1/artifacts/${enc(a.id)}/content`, scope.signal));
      const u = URL.createObjectURL(blob);
      const link = h('a', { href: u, download: a.name.split('/').pop() || a.id });
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(u), 60000);
    } catch (err) {
      replace(preview, errorBox(err));
    }
  };

  const rows = list.data.map((a) => {
    const canPreview = kindOf(a) && a.size <= maxPreviewBytes;
    const pv = h('button', { type: 'button', class: 'preview-btn', disabled: !canPreview, dataset: { artifactId: a.id } }, 'Preview');
    const dl = h('button', { type: 'button', class: 'download-btn' }, 'Download');
    pv.addEventListener('click', () => show(a, pv));
    dl.addEventListener('click', () => download(a, dl));
    return h('tr', { dataset: { artifactId: a.id } },
      h('td', { 'data-label': 'Name' }, h('strong', null, a.name), ' ', chip(`v${a.version}`), a.final ? chip('final', 'ok') : null),
      h('td', { 'data-label': 'Type', class: 'small' }, a.content_type),
      h('td', { 'data-label': 'Size', class: 'num' }, fmtBytes(a.size)),
      h('td', { 'data-label': 'Created' }, time(a.created_at)),
      h('td', { 'data-label': 'SHA-256', class: 'mono small', title: a.sha256 }, a.sha256.slice(0, 12) + '…'),
      h('td', { class: 'buttons' }, pv, dl));
  });
  replace(el,
    h('table', { class: 'table artifacts', id: 'artifacts-table' },
      h('thead', null, h('tr', null, ['Name', 'Type', 'Size', 'Created', 'SHA-256', ''].map((c) => h('th', null, c)))),
      h('tbody', null, rows)),
    preview);
  // The newest final artifact is what a review judges: show it at once.
  const last = [...list.data].reverse().find((a) => kindOf(a) && a.size <= maxPreviewBytes);
  if (last) show(last, rows[list.data.indexOf(last)].querySelector('.preview-btn'));
}
