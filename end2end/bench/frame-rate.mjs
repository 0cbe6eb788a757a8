// Issue 25 item 2's last lead: does Chromium's frame-rate limit set the
// floor of "nothing changed"? A fresh Chromium with Cordon's flags (from
// server/src/sandbox/chromium.rs) against the same with the frame-rate
// limit off, one browser a variant, taking turns click by click:
// - a click that repaints (a heading counts clicks): click start → the
//   first screencast frame after it, and → the page's second animation
//   frame (the no-op step's signal);
// - a click that changes nothing (no hover style either side): click
//   start → the second animation frame, and whether a frame came;
// - then what it costs: the CPU the browser's processes use over 5 s with
//   a CSS animation running, and idle.
// Not a test: `node end2end/bench/frame-rate.mjs` (env N, default 40
// clicks of each kind a variant). Prints medians; BENCHMARKS.md keeps them.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import puppeteer from 'puppeteer-core';

const root = path.resolve(fileURLToPath(new URL('.', import.meta.url)), '..', '..');
const rs = fs.readFileSync(path.join(root, 'server/src/sandbox/chromium.rs'), 'utf8');
const list = rs.slice(rs.indexOf('BASE_FLAGS: &[&str] = &['), rs.indexOf('];', rs.indexOf('BASE_FLAGS')));
const BASE = [...list.matchAll(/^\s*"([^"]+)",/gm)].map((m) => m[1]);
if (process.getuid() === 0) BASE.push('--no-sandbox');
const PAGES = {
  '/count': `<!doctype html><title>t</title><style>body{margin:0}#b{position:absolute;left:20px;top:20px;width:120px;height:40px;background:#ddd}</style>
<h1 style="margin-top:80px">0</h1><div id=b onclick="document.querySelector('h1').textContent=+document.querySelector('h1').textContent+1">+1</div>
<p style="position:absolute;left:400px;top:400px">nothing here</p>`,
  '/spin': `<!doctype html><title>s</title><style>@keyframes r{to{transform:rotate(360deg)}}div{width:100px;height:100px;background:#36c;animation:r 1s linear infinite;margin:100px}</style><div></div>`,
  '/idle': '<!doctype html><title>i</title><h1>Idle</h1>',
};
const srv = http.createServer((q, r) => { r.setHeader('content-type', 'text/html'); r.end(PAGES[q.url] || ''); });
await new Promise(r => srv.listen(0, '127.0.0.1', r));
const port = srv.address().port;
const started = new Set();
process.on('exit', () => { for (const c of started) c.kill('SIGKILL'); });
const sleep = ms => new Promise(r => setTimeout(r, ms));
const clk = () => 100; // USER_HZ

// CPU ticks (user + system) of a process and all its descendants.
function ticks(pid) {
  const kids = new Map();
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const s = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
      const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
      kids.set(+d, { ppid: +f[1], t: +f[11] + +f[12] });
    } catch { /* gone */ }
  }
  let sum = 0; const todo = [pid];
  while (todo.length) {
    const p = todo.pop(); const k = kids.get(p); if (k) sum += k.t;
    for (const [c, v] of kids) if (v.ppid === p) todo.push(c);
  }
  return sum;
}

async function browser(extra) {
  const prof = fs.mkdtempSync(path.join(os.tmpdir(), 'frate-'));
  const ch = spawn('/usr/bin/chromium', [...BASE, ...extra, `--user-data-dir=${prof}`, '--window-size=1280,720', 'about:blank'], { stdio: 'ignore' });
  started.add(ch);
  let p; for (let i = 0; i < 400 && !p; i++) { try { p = fs.readFileSync(`${prof}/DevToolsActivePort`, 'utf8').split('\n'); } catch { await sleep(25); } }
  const b = await puppeteer.connect({ browserWSEndpoint: `ws://127.0.0.1:${p[0]}${p[1]}`, defaultViewport: null });
  const [pg] = await b.pages();
  const s = await pg.createCDPSession();
  await s.send('Emulation.setDeviceMetricsOverride', { width: 1280, height: 720, deviceScaleFactor: 1, mobile: false });
  await pg.goto(`http://127.0.0.1:${port}/count`, { waitUntil: 'load' });
  let frames = [];
  s.on('Page.screencastFrame', e => { frames.push(performance.now()); s.send('Page.screencastFrameAck', { sessionId: e.sessionId }).catch(() => {}); });
  await s.send('Page.startScreencast', { format: 'jpeg', quality: 80, maxWidth: 1280, maxHeight: 720 });
  await sleep(500);
  const stop = async () => { b.disconnect(); ch.kill('SIGKILL'); await new Promise(r => ch.on('exit', r)); started.delete(ch); fs.rmSync(prof, { recursive: true, force: true }); };
  // Click at (x, y) as Cordon does: move, press, release; then the page's
  // second animation frame; returns [→ first frame, → second rAF].
  const click = async (x, y) => {
    frames = [];
    const t0 = performance.now();
    for (const type of ['mouseMoved', 'mousePressed', 'mouseReleased']) {
      await s.send('Input.dispatchMouseEvent', { type, x, y, button: type === 'mouseMoved' ? 'none' : 'left', clickCount: 1 });
    }
    await s.send('Runtime.evaluate', { expression: 'new Promise(r=>requestAnimationFrame(()=>requestAnimationFrame(()=>r(1))))', awaitPromise: true });
    const raf = performance.now() - t0;
    const d = performance.now() + 300;
    while (!frames.length && performance.now() < d) await sleep(1);
    return [frames.length ? frames[0] - t0 : null, raf];
  };
  const cpu = async (url, ms) => {
    await s.send('Page.stopScreencast');
    await pg.goto(`http://127.0.0.1:${port}${url}`, { waitUntil: 'load' });
    await sleep(500);
    const a = ticks(ch.pid); await sleep(ms); const z = ticks(ch.pid);
    return ((z - a) / clk()) / (ms / 1000) * 100; // % of one core
  };
  return { click, cpu, stop };
}

const variants = [
  ["Cordon's flags", []],
  ['--disable-frame-rate-limit', ['--disable-frame-rate-limit']],
  ['… and --disable-gpu-vsync', ['--disable-frame-rate-limit', '--disable-gpu-vsync']],
];
const N = +(process.env.N || 40);
const bs = [];
for (const [, x] of variants) bs.push(await browser(x));
const res = variants.map(() => ({ rep: [], repRaf: [], noop: [], noopFrames: 0 }));
for (let i = 0; i < N; i++) {
  for (const [j] of variants.entries()) {
    const [f, raf] = await bs[j].click(80, 40);
    if (f !== null) res[j].rep.push(f);
    res[j].repRaf.push(raf);
    await sleep(40 + (i % 7) * 3);
    const [nf, nraf] = await bs[j].click(600, 600);
    res[j].noop.push(nraf);
    if (nf !== null) res[j].noopFrames++;
    await sleep(40 + (i % 5) * 4);
  }
}
const med = a => { if (!a.length) return '—'; const s = [...a].sort((x, y) => x - y); return s[s.length >> 1].toFixed(1); };
const p95 = a => { if (!a.length) return '—'; const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length * 0.95)].toFixed(1); };
const cpu = [];
for (const b of bs) cpu.push([await b.cpu('/spin', 5000), await b.cpu('/idle', 5000)]);
for (const b of bs) await b.stop();
for (const [j, [name]] of variants.entries()) {
  const r = res[j];
  console.log(`${name.padEnd(28)} repaint: click → frame p50 ${med(r.rep)} (p95 ${p95(r.rep)}, ${r.rep.length}/${N} framed) → 2nd rAF ${med(r.repRaf)} ms | no-op: → 2nd rAF p50 ${med(r.noop)} (p95 ${p95(r.noop)}) ms, ${r.noopFrames} framed | CPU: animated ${cpu[j][0].toFixed(0)} %, idle ${cpu[j][1].toFixed(1)} % of a core`);
}
srv.close();
