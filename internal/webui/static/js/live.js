// Page lifetimes and polling. A page gets a Scope when it is shown; leaving
// it aborts the scope's requests, stops its streams and clears its timers.

export class Scope {
  constructor() {
    this.ctrl = new AbortController();
    this.cleanups = [];
  }

  get signal() {
    return this.ctrl.signal;
  }

  get done() {
    return this.ctrl.signal.aborted;
  }

  onDispose(fn) {
    this.cleanups.push(fn);
  }

  dispose() {
    if (this.done) return;
    this.ctrl.abort();
    for (const fn of this.cleanups.splice(0)) {
      try {
        fn();
      } catch (err) {
        console.error(err);
      }
    }
  }
}

export function isAbort(err) {
  return err && (err.name === 'AbortError' || err.name === 'TimeoutError');
}

// poll calls fn now and then every interval ms while the scope lives. A
// failure doubles the wait, up to max ms, until a call succeeds again; a
// hidden tab is polled at most every max ms; showing the tab again, or
// calling now(), polls at once. Calls never overlap: a now() during a call
// runs once more after it.
export function poll(scope, fn, { interval = 3000, max = 30000, onError = () => {} } = {}) {
  let delay = interval;
  let timer = null;
  let running = false;
  let again = false;

  const schedule = (ms) => {
    clearTimeout(timer);
    if (!scope.done) timer = setTimeout(run, ms);
  };

  async function run() {
    if (scope.done) return;
    if (running) {
      again = true;
      return;
    }
    running = true;
    try {
      await fn();
      delay = interval;
      onError(null);
    } catch (err) {
      if (isAbort(err) || scope.done) return;
      delay = Math.min(delay * 2, max);
      onError(err);
    } finally {
      running = false;
    }
    if (again) {
      again = false;
      schedule(0);
      return;
    }
    schedule(document.hidden ? Math.max(delay, max) : delay);
  }

  const onVisible = () => {
    if (!document.hidden) schedule(0);
  };
  document.addEventListener('visibilitychange', onVisible);
  scope.onDispose(() => {
    clearTimeout(timer);
    document.removeEventListener('visibilitychange', onVisible);
  });
  run();
  return { now: () => (running ? (again = true) : schedule(0)) };
}

// debounce runs fn once, ms after the last call.
export function debounce(scope, fn, ms) {
  let t = null;
  scope.onDispose(() => clearTimeout(t));
  return () => {
    clearTimeout(t);
    t = setTimeout(() => {
      if (!scope.done) fn();
    }, ms);
  };
}
