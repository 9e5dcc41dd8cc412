// The workspace of a session, taken over by a person: browse its
// directories (the live workspace, or any checkpoint's snapshot), download
// a file, and, while the session is paused, idle, waiting or
// requires_action, upload a file, edit a text file in place, or delete
// one. Each change is journaled by the server as workspace.changed (it
// shows in the timeline) and the model is told at its next call. Bytes are
// fetched with the API key and handed to the browser from memory, never by
// pointing the page at the API, so no key goes in a URL. A role that may
// not change files (a reader, an approver) browses and downloads only.

import { api, enc, fetchBlob, fetchFile, filePath, putFile, request } from '../api.js';
import { h, replace, fmtBytes, time, errorBox, busy, chip, field, truncate } from '../dom.js';
import { can, identity } from '../identity.js';

// Files larger than this are not opened in the editor.
const maxEditBytes = 1 << 20;

// One browser per tab panel: its place (source, directory) and an open
// editor survive the refreshes that events cause.
const browsers = new WeakMap();

export async function filesTab(el, scope, sessionId, getSession) {
  let b = browsers.get(el);
  if (!b) {
    b = browser(el, scope, sessionId, getSession);
    browsers.set(el, b);
  }
  await b.refresh();
}

function browser(el, scope, sessionId, getSession) {
  const base = `/v1/sessions/${enc(sessionId)}`;
  let dir = '.';
  let source = ''; // '' is the live workspace, else a checkpoint id
  let writable = false;
  const urls = [];
  scope.onDispose(() => urls.forEach((u) => URL.revokeObjectURL(u)));

  const sourceSel = h('select', { id: 'files-source', 'aria-label': 'Workspace or checkpoint' }, h('option', { value: '' }, 'Live workspace'));
  const crumbs = h('nav', { class: 'files-path', id: 'files-path', 'aria-label': 'Directory' });
  const notice = h('p', { class: 'files-writable', id: 'files-writable' });
  // Where a live listing of a session on a runner came from: the runner's
  // workspace, or (stopped, or the runner out of reach) the last snapshot,
  // which a person must know is not the files as they are this second.
  const origin = h('p', { class: 'files-origin muted', id: 'files-origin', hidden: true });
  const listing = h('div', { id: 'files-listing' });
  const result = h('div', { id: 'files-result' });

  const uploadInput = h('input', { type: 'file', id: 'files-upload-input' });
  const uploadPath = h('input', { type: 'text', id: 'files-upload-path', placeholder: 'Path in the workspace (default: this directory and the file name)' });
  const uploadGo = h('button', { type: 'button', class: 'primary', id: 'files-upload-go' }, 'Upload');
  const newFile = h('button', { type: 'button', id: 'files-new' }, 'New text file…');
  const upload = h('div', { class: 'control files-upload', id: 'files-upload' },
    h('h3', null, 'Upload a file'), field('File', uploadInput), field('To', uploadPath),
    h('div', { class: 'buttons' }, uploadGo, newFile));

  const editPath = h('input', { type: 'text', id: 'files-editor-path' });
  const editText = h('textarea', { rows: 16, id: 'files-editor-text', class: 'mono', spellcheck: 'false' });
  const editSave = h('button', { type: 'button', class: 'primary', id: 'files-editor-save' }, 'Save');
  const editClose = h('button', { type: 'button', id: 'files-editor-close' }, 'Close');
  const editor = h('div', { class: 'control files-editor', id: 'files-editor', hidden: true },
    h('h3', null, 'Edit'), field('Path', editPath), editText, h('div', { class: 'buttons' }, editSave, editClose));

  replace(el, h('div', { class: 'files-bar' }, sourceSel, crumbs), notice, origin, listing, result, upload, editor);

  const join = (d, name) => (d === '.' ? name : `${d}/${name}`);
  const fileURL = (p) => `${source ? `${base}/checkpoints/${enc(source)}` : base}/files/${filePath(p)}`;

  sourceSel.addEventListener('change', () => {
    source = sourceSel.value;
    dir = '.';
    closeEditor();
    refresh();
  });

  async function download(p, button) {
    try {
      const blob = await busy(button, fetchBlob(fileURL(p), scope.signal));
      const u = URL.createObjectURL(blob);
      urls.push(u);
      const link = h('a', { href: u, download: p.split('/').pop() });
      document.body.append(link);
      link.click();
      link.remove();
    } catch (err) {
      replace(result, errorBox(err));
    }
  }

  async function edit(p, button) {
    replace(result);
    try {
      const { blob, etag } = await busy(button, fetchFile(fileURL(p), scope.signal));
      const text = await blob.text();
      if (text.includes('\u0000')) {
        replace(result, errorBox(`${p} is not a text file: upload a new version instead.`));
        return;
      }
      openEditor(p, text, etag);
    } catch (err) {
      replace(result, errorBox(err));
    }
  }

  // editedFrom is the file the editor holds and the ETag it was read with:
  // saved to the same path, the edit is conditional on it (If-Match), so a
  // change made meanwhile by another person is never overwritten unseen.
  let editedFrom = null;

  function openEditor(p, text, etag) {
    editedFrom = etag ? { path: p, etag } : null;
    editPath.value = p;
    editText.value = text;
    editor.hidden = false;
    editText.focus();
  }

  function closeEditor() {
    editor.hidden = true;
    editText.value = '';
  }

  async function change(button, run, done) {
    replace(result);
    try {
      const ch = await busy(button, run());
      replace(result, h('p', { class: 'ok', id: 'files-ok' }, done(ch)));
      await refresh();
      return true;
    } catch (err) {
      replace(result, errorBox(err));
      return false;
    }
  }

  const wrote = (ch) => ch.unchanged
    ? `${ch.path} already holds these bytes: nothing changed.`
    : `Wrote ${ch.path} (${fmtBytes(ch.size)}, sha256 ${ch.sha256.slice(0, 12)}…): the agent is told at its next call.`;

  async function remove(p, button) {
    if (!window.confirm(`Delete ${p} from the workspace?`)) return;
    await change(button, () => request('DELETE', fileURL(p)), (ch) => `Deleted ${ch.path}: the agent is told at its next call.`);
  }

  uploadGo.addEventListener('click', async () => {
    const f = uploadInput.files && uploadInput.files[0];
    if (!f) {
      replace(result, errorBox('Choose a file to upload.'));
      return;
    }
    const p = uploadPath.value.trim() || join(dir, f.name);
    if (await change(uploadGo, () => putFile(`${base}/files/${filePath(p)}`, f, undefined, scope.signal), wrote)) {
      uploadInput.value = '';
      uploadPath.value = '';
    }
  });
  newFile.addEventListener('click', () => openEditor(join(dir, 'new.txt'), ''));
  editClose.addEventListener('click', closeEditor);
  editSave.addEventListener('click', async () => {
    const p = editPath.value.trim();
    if (!p) {
      replace(result, errorBox('path: required'));
      return;
    }
    const body = new Blob([editText.value], { type: 'application/octet-stream' });
    const ifMatch = editedFrom && editedFrom.path === p ? editedFrom.etag : undefined;
    if (await change(editSave, () => putFile(`${base}/files/${filePath(p)}`, body, undefined, scope.signal, ifMatch), wrote)) {
      closeEditor();
    }
  });

  function renderCrumbs() {
    const parts = dir === '.' ? [] : dir.split('/');
    const go = (d) => {
      dir = d;
      refresh();
    };
    const root = h('button', { type: 'button', class: 'link', dataset: { dir: '.' } }, source ? `checkpoint ${source}` : 'workspace');
    root.addEventListener('click', () => go('.'));
    replace(crumbs, root, parts.map((name, i) => {
      const d = parts.slice(0, i + 1).join('/');
      const b = h('button', { type: 'button', class: 'link', dataset: { dir: d } }, name);
      b.addEventListener('click', () => go(d));
      return [' / ', b];
    }));
  }

  function renderListing(l) {
    const mayWrite = can('PutFileIfMatch');
    const mayDelete = can('DeleteFileIfMatch');
    writable = !source && l.writable && mayWrite;
    const s = getSession();
    const me = identity();
    notice.textContent = source
      ? 'A checkpoint\'s snapshot: read only.'
      : !mayWrite
        ? `Read only: your role${me ? ` (${me.role})` : ''} may not change a workspace's files.`
        : writable
          ? `The session is ${s ? s.status : 'parked'}: you may change its files; the agent is told at its next call.`
          : `The session is ${s ? s.status : 'running'}: read only. Pause it (or wait until it needs a person or is idle) to change files.`;
    notice.dataset.writable = String(writable);
    origin.hidden = !!source || !l.source;
    origin.dataset.source = source ? '' : l.source || '';
    origin.dataset.snapshot = source ? '' : l.snapshot || '';
    origin.textContent = l.source === 'snapshot'
      ? `Read from snapshot ${truncate(l.snapshot || '', 23)}, not from the runner: its environment is stopped or its runner is out of reach (people's changes since are shown).`
      : l.source === 'environment' ? 'Live: read from the environment on its runner.' : '';
    upload.hidden = !writable;
    if (!writable) closeEditor();
    if (!l.entries.length) {
      replace(listing, h('p', { class: 'muted' }, 'This directory is empty.'));
      return;
    }
    const rows = l.entries.map((e) => {
      const name = e.type === 'dir'
        ? h('button', { type: 'button', class: 'link dir', dataset: { dir: e.path } }, `${e.name}/`)
        : h('span', null, e.name, e.type === 'symlink' ? h('span', { class: 'muted' }, ` → ${e.target}`) : null);
      if (e.type === 'dir') {
        name.addEventListener('click', () => {
          dir = e.path;
          refresh();
        });
      }
      const buttons = [];
      if (e.type === 'file') {
        const dl = h('button', { type: 'button', class: 'download-btn' }, 'Download');
        dl.addEventListener('click', () => download(e.path, dl));
        buttons.push(dl);
        if (writable && e.size <= maxEditBytes) {
          const ed = h('button', { type: 'button', class: 'edit-btn' }, 'Edit');
          ed.addEventListener('click', () => edit(e.path, ed));
          buttons.push(ed);
        }
      }
      if (!source && l.writable && mayDelete && (e.type === 'file' || e.type === 'symlink')) {
        const rm = h('button', { type: 'button', class: 'danger-outline delete-btn' }, 'Delete');
        rm.addEventListener('click', () => remove(e.path, rm));
        buttons.push(rm);
      }
      return h('tr', { dataset: { path: e.path, type: e.type } },
        h('td', { 'data-label': 'Name' }, name),
        h('td', { 'data-label': 'Type' }, chip(e.type)),
        h('td', { 'data-label': 'Size', class: 'num' }, e.type === 'file' ? fmtBytes(e.size) : ''),
        h('td', { 'data-label': 'SHA-256', class: 'mono small', title: e.sha256 || '' }, e.sha256 ? e.sha256.slice(0, 12) + '…' : ''),
        h('td', { 'data-label': 'Modified' }, e.mtime ? time(e.mtime) : ''),
        h('td', { class: 'buttons' }, buttons));
    });
    replace(listing,
      h('table', { class: 'table files', id: 'files-table' },
        h('thead', null, h('tr', null, ['Name', 'Type', 'Size', 'SHA-256', 'Modified', ''].map((c) => h('th', null, c)))),
        h('tbody', null, rows)),
      l.truncated ? h('p', { class: 'muted' }, `${l.entries.length} of ${l.total} entries.`) : null);
  }

  async function loadSources() {
    const cps = await api.get(`${base}/checkpoints`, undefined, { signal: scope.signal });
    const have = new Set([...sourceSel.options].map((o) => o.value));
    for (const c of cps.data) {
      if (!c.snapshot || have.has(c.id)) continue;
      sourceSel.append(h('option', { value: c.id }, `Checkpoint “${c.name}” (${c.kind}, event #${c.event_seq})`));
    }
  }

  async function refresh() {
    renderCrumbs();
    try {
      await loadSources();
      const path = source ? `${base}/checkpoints/${enc(source)}/files` : `${base}/files`;
      renderListing(await api.get(path, dir === '.' ? undefined : { path: dir }, { signal: scope.signal }));
    } catch (err) {
      if (err.name === 'AbortError') return;
      replace(listing, errorBox(err));
    }
  }

  return { refresh };
}
