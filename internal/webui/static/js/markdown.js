// A small Markdown renderer for artifact previews that builds DOM nodes
// directly: headings, paragraphs, lists, block quotes, fenced and indented
// code, rules, tables' rows as text, and inline code, emphasis and links.
// Raw HTML in the source is shown as text, never parsed; links keep only
// http(s), mailto and in-page targets.

import { h } from './dom.js';

function safeHref(url) {
  const u = url.trim();
  if (/^(https?:|mailto:)/i.test(u) || u.startsWith('#')) return u;
  return null;
}

// inline renders one line's inline syntax into nodes.
export function inline(text) {
  const out = [];
  // Underscores emphasise only at word edges (snake_case and __dunder__
  // names stay as they are), as in CommonMark.
  const re = /(`+)([\s\S]*?[^`])\1(?!`)|\*\*([^*]+)\*\*|(?<!\w)__([^_]+)__(?!\w)|\*([^*\s][^*]*)\*|(?<!\w)_([^_\s][^_]*)_(?!\w)|\[([^\]]+)\]\(([^)\s]+)\)/g;
  let last = 0;
  let m;
  while ((m = re.exec(text)) !== null) {
    if (m.index > last) out.push(text.slice(last, m.index));
    if (m[1]) out.push(h('code', null, m[2].trim()));
    else if (m[3] || m[4]) out.push(h('strong', null, inline(m[3] || m[4])));
    else if (m[5] || m[6]) out.push(h('em', null, inline(m[5] || m[6])));
    else if (m[7]) {
      const href = safeHref(m[8]);
      out.push(href ? h('a', { href, rel: 'noopener noreferrer', target: '_blank' }, inline(m[7])) : m[0]);
    }
    last = re.lastIndex;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

// render returns a <div class="markdown"> for the source text.
export function render(src) {
  const root = h('div', { class: 'markdown' });
  const lines = String(src).replace(/\r\n?/g, '\n').split('\n');
  let i = 0;
  let para = [];
  const flush = () => {
    if (para.length) {
      const p = h('p');
      para.forEach((l, j) => {
        if (j) p.append(' ');
        p.append(...inline(l.trim()));
      });
      root.append(p);
      para = [];
    }
  };
  while (i < lines.length) {
    const line = lines[i];
    let m;
    if ((m = /^\s*(```+|~~~+)\s*([\w+-]*)\s*$/.exec(line))) {
      flush();
      const fence = m[1];
      const body = [];
      i++;
      while (i < lines.length && !lines[i].trim().startsWith(fence)) body.push(lines[i++]);
      i++;
      root.append(h('pre', { class: 'code' }, h('code', m[2] ? { 'data-lang': m[2] } : null, body.join('\n'))));
      continue;
    }
    if ((m = /^(#{1,6})\s+(.*?)\s*#*\s*$/.exec(line))) {
      flush();
      root.append(h(`h${m[1].length}`, null, inline(m[2])));
      i++;
      continue;
    }
    if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) {
      flush();
      root.append(h('hr'));
      i++;
      continue;
    }
    if (/^\s*>/.test(line)) {
      flush();
      const body = [];
      while (i < lines.length && /^\s*>/.test(lines[i])) body.push(lines[i++].replace(/^\s*>\s?/, ''));
      const q = render(body.join('\n'));
      root.append(h('blockquote', null, ...q.childNodes));
      continue;
    }
    if ((m = /^(\s*)([-*+]|\d+[.)])\s+/.exec(line))) {
      flush();
      const ordered = /\d/.test(m[2]);
      const list = h(ordered ? 'ol' : 'ul');
      while (i < lines.length) {
        const lm = /^(\s*)([-*+]|\d+[.)])\s+(.*)$/.exec(lines[i]);
        if (!lm) {
          // A continuation line, indented under the item.
          if (/^\s{2,}\S/.test(lines[i]) && list.lastChild) {
            list.lastChild.append(' ', ...inline(lines[i].trim()));
            i++;
            continue;
          }
          break;
        }
        const item = h('li');
        const task = /^\[([ xX])\]\s+(.*)$/.exec(lm[3]);
        if (task) {
          item.append(h('input', { type: 'checkbox', disabled: true, checked: task[1] !== ' ' }), ' ', ...inline(task[2]));
        } else item.append(...inline(lm[3]));
        list.append(item);
        i++;
      }
      root.append(list);
      continue;
    }
    if (/^( {4}|\t)/.test(line) && para.length === 0) {
      const body = [];
      while (i < lines.length && (/^( {4}|\t)/.test(lines[i]) || lines[i].trim() === '')) {
        body.push(lines[i++].replace(/^( {4}|\t)/, ''));
      }
      while (body.length && body[body.length - 1].trim() === '') body.pop();
      root.append(h('pre', { class: 'code' }, h('code', null, body.join('\n'))));
      continue;
    }
    if (line.trim() === '') {
      flush();
      i++;
      continue;
    }
    para.push(line);
    i++;
  }
  flush();
  return root;
}
