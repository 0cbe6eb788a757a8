// Cordon's live view in the browser: draws the session's screencast on a
// canvas and sends the operator's pointer, wheel and keys back over the
// WebSocket `/live/{session}` (protocol: app/src/api/live.rs). Like
// passkey.js it is plain JavaScript: a hot input loop of binary frames and
// raw DOM events, kept out of the wasm bundle. It attaches to every
// `[data-live-view]` element, also ones client-side navigation adds later.
// Nothing typed is logged or kept here.

const MODIFIERS = (e) => (e.altKey ? 1 : 0) | (e.ctrlKey ? 2 : 0) | (e.metaKey ? 4 : 0) | (e.shiftKey ? 8 : 0);
const BUTTONS = ['left', 'middle', 'right', 'back', 'forward'];

class LiveView {
  constructor(root) {
    this.root = root;
    this.session = root.dataset.session;
    this.$ = (sel) => root.querySelector(sel);
    this.canvas = this.$('[data-canvas]');
    this.ctx = this.canvas.getContext('2d');
    this.keys = this.$('[data-keys]');
    this.meta = null; // the last frame's metadata
    this.pendingMeta = null; // describes the binary message that follows
    this.frames = 0;
    this.fpsCount = 0;
    this.control = { holder: null, yours: false, may_control: false };
    this.ended = false;
    this.retry = 0;
    this.lastDown = { t: 0, x: 0, y: 0, count: 0 };
    this.moveQueued = null;
    this.bind();
    this.fpsTimer = setInterval(() => {
      this.$('[data-fps]').textContent = `${this.fpsCount} fps`;
      this.root.dataset.fps = String(this.fpsCount);
      this.fpsCount = 0;
    }, 1000);
    this.connect();
  }

  state(s, text) {
    this.root.dataset.state = s;
    this.$('[data-conn]').textContent = text;
    const overlay = this.$('[data-overlay]');
    overlay.hidden = s === 'live';
    overlay.textContent = text;
  }

  error(message) {
    const el = this.$('[data-error]');
    el.textContent = message;
    el.hidden = false;
    clearTimeout(this.errorTimer);
    this.errorTimer = setTimeout(() => { el.hidden = true; }, 6000);
  }

  async connect() {
    if (this.closed) return;
    this.state('connecting', this.retry ? 'Reconnecting…' : 'Connecting…');
    let access;
    try {
      const res = await fetch('/ui/fn/live_ticket', {
        method: 'POST',
        credentials: 'same-origin',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ session: this.session }),
      });
      const json = await res.json().catch(() => ({}));
      if (!res.ok) {
        const msg = json.error?.message || json.message || `the server answered ${res.status}`;
        if (res.status === 401) return this.end('Your dashboard session ended: log in again.');
        if (res.status === 404 || res.status === 409) return this.end(msg);
        throw new Error(msg);
      }
      access = json;
    } catch (e) {
      return this.again(`Cannot reach Cordon (${e.message}).`);
    }
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const ws = new WebSocket(`${proto}//${location.host}${access.path}`);
    ws.binaryType = 'blob';
    this.ws = ws;
    ws.onopen = () => { this.retry = 0; };
    ws.onmessage = (ev) => this.onMessage(ev.data);
    ws.onclose = () => {
      if (this.ws !== ws) return;
      this.ws = null;
      if (!this.ended) this.again('The connection dropped.');
    };
  }

  again(why) {
    if (this.ended || this.closed) return;
    this.retry += 1;
    const wait = Math.min(10, 2 ** Math.min(this.retry - 1, 4));
    this.state('reconnecting', `${why} Reconnecting in ${wait} s…`);
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => this.connect(), wait * 1000);
  }

  end(reason) {
    this.ended = true;
    this.state('ended', reason);
    this.root.dataset.endReason = reason;
    this.keys.blur();
    this.root.classList.remove('driving');
    this.$('[data-control]').textContent = 'Nobody drives an ended session.';
    this.$('[data-take]').hidden = true;
    this.$('[data-release]').hidden = true;
    for (const b of this.root.querySelectorAll('button, input, select')) b.disabled = true;
  }

  send(msg) {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(msg));
  }

  async onMessage(data) {
    if (typeof data !== 'string') {
      const meta = this.pendingMeta;
      this.pendingMeta = null;
      if (!meta) return;
      let bitmap;
      try {
        bitmap = await createImageBitmap(data);
      } catch {
        return;
      }
      if (this.canvas.width !== bitmap.width || this.canvas.height !== bitmap.height) {
        this.canvas.width = bitmap.width;
        this.canvas.height = bitmap.height;
        this.root.style.setProperty('--live-aspect', `${bitmap.width} / ${bitmap.height}`);
      }
      this.ctx.drawImage(bitmap, 0, 0);
      bitmap.close();
      this.meta = meta;
      this.frames += 1;
      this.fpsCount += 1;
      this.root.dataset.frames = String(this.frames);
      if (this.root.dataset.state !== 'live') this.state('live', 'Live');
      return;
    }
    let msg;
    try { msg = JSON.parse(data); } catch { return; }
    switch (msg.type) {
      case 'hello':
        this.root.dataset.mode = msg.mode;
        this.state('live', 'Live');
        break;
      case 'frame':
        this.pendingMeta = msg;
        break;
      case 'page':
        this.page(msg);
        break;
      case 'control':
        this.setControl(msg);
        break;
      case 'error':
        this.error(msg.message);
        break;
      case 'ended':
        this.end(`Ended: ${msg.reason}.`);
        break;
      default:
        break;
    }
  }

  page(p) {
    const url = this.$('[data-url]');
    if (document.activeElement !== url) url.value = p.url;
    this.root.dataset.title = p.title;
    this.root.dataset.loading = String(p.loading);
    const strip = this.$('[data-tabs]');
    strip.replaceChildren(...p.tabs.map((t) => {
      const tab = document.createElement('span');
      tab.className = 'live-tab';
      tab.setAttribute('role', 'tab');
      tab.setAttribute('aria-selected', String(t.active));
      const pick = document.createElement('button');
      pick.type = 'button';
      pick.textContent = (t.title || t.url || 'New tab').slice(0, 40);
      pick.title = t.url;
      pick.onclick = () => this.send({ type: 'tab_switch', id: t.id });
      const close = document.createElement('button');
      close.type = 'button';
      close.className = 'close';
      close.textContent = '×';
      close.setAttribute('aria-label', `Close ${t.title || 'tab'}`);
      close.onclick = () => this.send({ type: 'tab_close', id: t.id });
      tab.append(pick, close);
      return tab;
    }), (() => {
      const add = document.createElement('button');
      add.type = 'button';
      add.className = 'new-tab';
      add.textContent = '+';
      add.setAttribute('aria-label', 'New tab');
      add.onclick = () => this.send({ type: 'tab_open' });
      return add;
    })());
    this.dialog(p.dialog);
    if (p.loading) this.$('[data-conn]').textContent = 'Loading…';
    else if (this.root.dataset.state === 'live') this.$('[data-conn]').textContent = 'Live';
  }

  // The shown tab's JavaScript dialog (it stops the page): its message
  // and OK / Cancel, answered by whoever drives.
  dialog(d) {
    const box = this.$('[data-dialog]');
    this.root.dataset.dialogOpen = d ? d.kind : '';
    if (!d) {
      box.hidden = true;
      this.dialogShown = null;
      return;
    }
    const key = `${d.kind}\n${d.message}`;
    if (this.dialogShown === key && !box.hidden) return;
    this.dialogShown = key;
    const names = { alert: 'The page says', confirm: 'The page asks you to confirm', prompt: 'The page asks for an answer', beforeunload: 'Leave this page?' };
    this.$('[data-dialog-kind]').textContent = names[d.kind] || 'The page asks';
    this.$('[data-dialog-message]').textContent = d.message || '(no message)';
    const text = this.$('[data-dialog-text]');
    text.hidden = d.kind !== 'prompt';
    text.value = d.default_prompt || '';
    this.$('[data-dialog-answer="cancel"]').hidden = d.kind === 'alert';
    box.hidden = false;
    this.dialogControls();
  }

  dialogControls() {
    const mine = this.driving();
    for (const b of this.root.querySelectorAll('[data-dialog-answer], [data-dialog-text]')) b.disabled = !mine || this.ended;
    this.$('[data-dialog-note]').textContent = mine
      ? 'The page is stopped until you answer.'
      : 'The page is stopped until whoever drives answers. Take control to answer it.';
  }

  setControl(c) {
    this.control = c;
    this.root.dataset.control = c.yours ? 'yours' : c.holder ? 'other' : 'none';
    const refresh = this.root.dataset.mode === 'refresh';
    const text = c.yours
      ? (refresh ? 'You are driving this browser.' : 'You have control: the agent waits until you hand back.')
      : c.holder
        ? `${c.holder} has control.`
        : this.root.dataset.mode === 'refresh'
          ? 'Take control to drive this browser.'
          : 'The agent drives. Take control to drive it yourself.';
    this.$('[data-control]').textContent = text;
    this.$('[data-take]').hidden = !c.may_control || c.yours;
    this.$('[data-release]').hidden = !c.yours || this.root.dataset.mode === 'refresh';
    this.root.classList.toggle('driving', c.yours);
    this.dialogControls();
  }

  // Canvas pixels → the page's CSS pixels, from the last frame's metadata.
  point(e) {
    const rect = this.canvas.getBoundingClientRect();
    const w = this.meta?.width || this.canvas.width;
    const h = this.meta?.height || this.canvas.height;
    const top = this.meta?.offset_top || 0;
    const x = ((e.clientX - rect.left) / rect.width) * w;
    const y = ((e.clientY - rect.top) / rect.height) * (h + top) - top;
    return { x: Math.min(Math.max(x, 0), w - 1), y: Math.min(Math.max(y, 0), h - 1) };
  }

  driving() {
    return this.control.yours;
  }

  bind() {
    const c = this.canvas;
    c.addEventListener('contextmenu', (e) => e.preventDefault());
    c.addEventListener('pointerdown', (e) => {
      this.keys.focus({ preventScroll: true });
      if (!this.driving()) {
        if (this.control.may_control) this.error('Take control first to drive this browser.');
        return;
      }
      e.preventDefault();
      c.setPointerCapture(e.pointerId);
      const p = this.point(e);
      const now = performance.now();
      const near = Math.abs(p.x - this.lastDown.x) < 5 && Math.abs(p.y - this.lastDown.y) < 5;
      const count = now - this.lastDown.t < 400 && near ? this.lastDown.count + 1 : 1;
      this.lastDown = { t: now, x: p.x, y: p.y, count };
      this.send({ type: 'mouse', action: 'down', ...p, button: BUTTONS[e.button] || 'left', buttons: e.buttons, click_count: count, modifiers: MODIFIERS(e) });
    });
    c.addEventListener('pointerup', (e) => {
      if (!this.driving()) return;
      e.preventDefault();
      const p = this.point(e);
      this.send({ type: 'mouse', action: 'up', ...p, button: BUTTONS[e.button] || 'left', buttons: e.buttons, click_count: this.lastDown.count, modifiers: MODIFIERS(e) });
    });
    c.addEventListener('pointermove', (e) => {
      if (!this.driving()) return;
      // One move per animation frame: the newest position.
      const first = this.moveQueued === null;
      this.moveQueued = { type: 'mouse', action: 'move', ...this.point(e), button: 'none', buttons: e.buttons, modifiers: MODIFIERS(e) };
      if (first) requestAnimationFrame(() => { this.send(this.moveQueued); this.moveQueued = null; });
    });
    c.addEventListener('wheel', (e) => {
      if (!this.driving()) return;
      e.preventDefault();
      const scale = e.deltaMode === 1 ? 40 : e.deltaMode === 2 ? 400 : 1;
      this.send({ type: 'wheel', ...this.point(e), dx: e.deltaX * scale, dy: e.deltaY * scale, modifiers: MODIFIERS(e) });
    }, { passive: false });

    // The keyboard goes through a hidden textarea that holds the focus, so
    // IME composition and paste work; Shift+Escape gives the keyboard back.
    const k = this.keys;
    const hint = this.$('[data-focus-hint]');
    k.addEventListener('focus', () => { this.root.classList.add('keyboard'); hint.hidden = false; });
    k.addEventListener('blur', () => { this.root.classList.remove('keyboard'); hint.hidden = true; });
    this.$('[data-blur]').addEventListener('click', () => k.blur());
    const key = (action) => (e) => {
      if (e.key === 'Escape' && e.shiftKey) {
        e.preventDefault();
        k.blur();
        return;
      }
      if (e.isComposing || e.keyCode === 229 || e.key === 'Process' || e.key === 'Dead') return;
      if (!this.driving()) return;
      // Let the browser raise paste events; everything else is the page's.
      if ((e.ctrlKey || e.metaKey) && e.key.toLowerCase() === 'v') return;
      e.preventDefault();
      this.send({ type: 'key', action, key: e.key, code: e.code, modifiers: MODIFIERS(e) });
    };
    k.addEventListener('keydown', key('down'));
    k.addEventListener('keyup', key('up'));
    k.addEventListener('compositionend', (e) => {
      if (this.driving() && e.data) this.send({ type: 'text', text: e.data });
      k.value = '';
    });
    k.addEventListener('paste', (e) => {
      e.preventDefault();
      const text = e.clipboardData?.getData('text') || '';
      if (this.driving() && text) this.send({ type: 'text', text: text.slice(0, 4096) });
    });
    k.addEventListener('input', () => { if (!k.matches(':focus-within') || k.value.length > 64) k.value = ''; });

    for (const b of this.root.querySelectorAll('[data-act]')) {
      b.addEventListener('click', () => this.send({ type: b.dataset.act }));
    }
    this.$('[data-url-form]').addEventListener('submit', (e) => {
      e.preventDefault();
      let url = this.$('[data-url]').value.trim();
      if (!url) return;
      if (!/^[a-z][a-z0-9+.-]*:/i.test(url)) url = `https://${url}`;
      this.send({ type: 'navigate', url });
      this.keys.focus({ preventScroll: true });
    });
    for (const b of this.root.querySelectorAll('[data-dialog-answer]')) {
      b.addEventListener('click', () => {
        if (!this.driving()) return;
        const accept = b.dataset.dialogAnswer === 'ok';
        const text = this.$('[data-dialog-text]');
        const msg = { type: 'dialog', accept };
        if (accept && !text.hidden) msg.text = text.value.slice(0, 4096);
        this.send(msg);
      });
    }
    this.$('[data-take]').addEventListener('click', () => this.send({ type: 'take_control' }));
    this.$('[data-release]').addEventListener('click', () => this.send({ type: 'release_control' }));
    this.$('[data-viewport]').addEventListener('change', (e) => {
      const [width, height] = e.target.value.split('x').map(Number);
      if (width && height) this.send({ type: 'resize', width, height });
    });
  }

  close() {
    this.closed = true;
    clearInterval(this.fpsTimer);
    clearTimeout(this.retryTimer);
    if (this.ws) {
      const ws = this.ws;
      this.ws = null;
      ws.close();
    }
  }
}

const views = new Map();
function scan() {
  for (const el of document.querySelectorAll('[data-live-view]')) {
    if (!views.has(el)) views.set(el, new LiveView(el));
  }
  for (const [el, view] of views) {
    if (!el.isConnected) {
      view.close();
      views.delete(el);
    }
  }
}
new MutationObserver(scan).observe(document.documentElement, { childList: true, subtree: true });
scan();
