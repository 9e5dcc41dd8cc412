// The count of pending actions beside "Inbox" in the navigation. The shell
// polls it; pages that see actions come and go (the inbox, a session's
// stream) set it or ask for a fresh count at once.

let refresher = () => {};

export function setInboxCount(n) {
  const el = document.getElementById('inbox-count');
  if (!el) return;
  el.hidden = !n;
  el.textContent = n >= 500 ? '500+' : String(n);
}

// setInboxRefresher registers how to read the count again (the shell's
// poll).
export function setInboxRefresher(fn) {
  refresher = fn;
}

// refreshInboxCount reads the count again now.
export function refreshInboxCount() {
  refresher();
}
