// The page behind a live link (/embed/{session}?link=…): an agent's own user
// watches the session's browser on a canvas and, with a `control` link,
// drives it with the pointer and keyboard. The protocol is the live view's
// (app/src/api/live.rs) over /embed/{session}/ws; the server runs the input
// as the agent that made the link, through the risk gate. Nothing typed is
// logged or kept here.

const MODIFIERS = (e) => (e.altKey ? 1 : 0) | (e.ctrlKey ? 2 : 0) | (e.metaKey ? 4 : 0) | (e.shiftKey ? 8 : 0);
const BUTTONS = ['left', 'middle', 'right', 'back', 'forward'];

class Embed {
  constructor(root) {
    this.root = root;
    this.$ = (sel) => root.querySelector(sel);
    this.canvas = this.$('[data-canvas]');
    this.ctx = this.canvas.getContext('2d');
    this.keys = this.$('[data-keys]');
    this.link = new URLSearchParams(location.search).get('link') || '';
    this.control = root.dataset.mode === 'control';
    this.operator = false; // an operator has taken over
    this.meta = null;
    this.pendingMeta = null;
    this.frames = 0;
    this.ended = false;
    this.retry = 0;
    this.lastDown = { t: 0, x: 0, y: 0, count: 0 };
    this.moveQueued = null;
    if (this.control) this.bind();
    this.connect();
  }

  state(s, text) {
    this.root.dataset.state = s;
    this.$('[data-status]').textContent = text;
    const overlay = this.$('[data-overlay]');
    overlay.hidden = s === 'live';
    overlay.textContent = text;
  }

  note() {
    const text = !this.control
      ? 'View only'
      : this.operator
        ? 'An operator has taken over; input waits'
        : 'Click the picture to type';
    this.$('[data-note]').textContent = text;
    this.root.dataset.operator = String(this.operator);
  }

  error(message) {
    const el = this.$('[data-error]');
    el.textContent = message;
    el.hidden = false;
    clearTimeout(this.errorTimer);
    this.errorTimer = setTimeout(() => { el.hidden = true; }, 6000);
  }

  connect() {
    if (this.ended) return;
    this.state('connecting', this.retry ? 'Reconnecting…' : 'Connecting…');
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const ws = new WebSocket(`${proto}//${location.host}${location.pathname}/ws?link=${encodeURIComponent(this.link)}`);
    ws.binaryType = 'blob';
    this.ws = ws;
    let opened = false;
    ws.onopen = () => { opened = true; this.retry = 0; };
    ws.onmessage = (ev) => this.onMessage(ev.data);
    ws.onclose = () => {
      if (this.ws !== ws) return;
      this.ws = null;
      if (this.ended) return;
      if (opened) this.again('The connection dropped.');
      else this.refused();
    };
  }

  // The upgrade was refused: ask the page itself why (an expired or
  // revoked link answers 410), else try again later.
  async refused() {
    try {
      const res = await fetch(location.href, { cache: 'no-store', credentials: 'omit' });
      if (res.status === 404 || res.status === 403 || res.status === 410) {
        const doc = new DOMParser().parseFromString(await res.text(), 'text/html');
        const why = doc.querySelector('[data-gone] h1')?.textContent || 'This link no longer works';
        return this.end(`${why}.`);
      }
      if (res.status === 429) return this.again('This link is open in too many places.');
    } catch {
      // Fall through: Cordon is unreachable for now.
    }
    this.again('Cannot reach the browser.');
  }

  again(why) {
    if (this.ended) return;
    this.retry += 1;
    const wait = Math.min(10, 2 ** Math.min(this.retry - 1, 4));
    this.state('reconnecting', `${why} Reconnecting in ${wait} s…`);
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => this.connect(), wait * 1000);
  }

  end(reason) {
    this.ended = true;
    this.root.dataset.endReason = reason;
    this.state('ended', reason);
    this.keys.blur();
    this.$('[data-note]').textContent = '';
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
        this.root.style.setProperty('--aspect', `${bitmap.width} / ${bitmap.height}`);
      }
      this.ctx.drawImage(bitmap, 0, 0);
      bitmap.close();
      this.meta = meta;
      this.frames += 1;
      this.root.dataset.frames = String(this.frames);
      if (this.root.dataset.state !== 'live') this.state('live', 'Live');
      return;
    }
    let msg;
    try { msg = JSON.parse(data); } catch { return; }
    switch (msg.type) {
      case 'hello':
        this.state('live', 'Live');
        this.note();
        break;
      case 'frame':
        this.pendingMeta = msg;
        break;
      case 'page':
        this.root.dataset.title = msg.title;
        this.dialog(msg.dialog);
        break;
      case 'control':
        this.operator = Boolean(msg.holder);
        this.note();
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
    return this.control && !this.operator && !this.ended;
  }

  // A JavaScript dialog stops the page: its message, and OK / Cancel for
  // a control link (the risk gate judges OK as it judges a click).
  dialog(d) {
    const box = this.$('[data-dialog]');
    this.root.dataset.dialogOpen = d ? d.kind : '';
    if (!d) {
      box.hidden = true;
      this.dialogShown = null;
      return;
    }
    const key = `${d.kind}\n${d.message}`;
    if (this.dialogShown === key) return;
    this.dialogShown = key;
    const names = { alert: 'The page says', confirm: 'The page asks you to confirm', prompt: 'The page asks for an answer', beforeunload: 'Leave this page?' };
    this.$('[data-dialog-kind]').textContent = names[d.kind] || 'The page asks';
    this.$('[data-dialog-message]').textContent = d.message || '(no message)';
    const text = this.$('[data-dialog-text]');
    text.hidden = d.kind !== 'prompt' || !this.control;
    text.value = d.default_prompt || '';
    this.$('[data-dialog-buttons]').hidden = !this.control;
    this.$('[data-dialog-answer="cancel"]').hidden = d.kind === 'alert';
    box.hidden = false;
  }

  bind() {
    const c = this.canvas;
    c.addEventListener('contextmenu', (e) => e.preventDefault());
    c.addEventListener('pointerdown', (e) => {
      this.keys.focus({ preventScroll: true });
      if (!this.driving()) return;
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

    // Keys go through a hidden textarea that holds the focus, so IME
    // composition and paste work; Shift+Escape gives the keyboard back.
    const k = this.keys;
    k.addEventListener('focus', () => this.root.classList.add('keyboard'));
    k.addEventListener('blur', () => this.root.classList.remove('keyboard'));
    const key = (action) => (e) => {
      if (e.key === 'Escape' && e.shiftKey) {
        e.preventDefault();
        k.blur();
        return;
      }
      if (e.isComposing || e.keyCode === 229 || e.key === 'Process' || e.key === 'Dead') return;
      if (!this.driving()) return;
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
    k.addEventListener('input', () => { if (k.value.length > 64) k.value = ''; });
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
  }
}

const root = document.querySelector('[data-embed]');
if (root) new Embed(root);
