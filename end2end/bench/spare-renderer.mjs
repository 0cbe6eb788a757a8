// What Chromium's spare renderer buys: a fresh Chromium with Cordon's
// flags (from server/src/sandbox/chromium.rs) against the same with the
// spare renderer disabled, alternating, each waiting at about:blank as a
// warm browser does, then: the first navigation, a cross-site one
// (127.0.0.1 → localhost), one back, a new tab and its first page. Not a
// test: `node end2end/bench/spare-renderer.mjs` (env N, default 9 browsers
// a variant). Prints the medians; BENCHMARKS.md keeps the figures.
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
const feats = BASE.find(f => f.startsWith('--disable-features='));
const srv = http.createServer((q, r) => { r.setHeader('content-type', 'text/html'); r.end('<!doctype html><title>t</title><h1>Hi</h1><input>'); });
await new Promise(r => srv.listen(0, '127.0.0.1', r));
const port = srv.address().port;
// Whatever happens below, the browsers started here stop with this process.
const started = new Set();
process.on('exit', () => { for (const c of started) c.kill('SIGKILL'); });
const sleep = ms => new Promise(r => setTimeout(r, ms));
async function run(extra) {
  const prof = fs.mkdtempSync(path.join(os.tmpdir(), 'spare-'));
  const ch = spawn('/usr/bin/chromium', [...BASE, ...extra, `--user-data-dir=${prof}`, '--window-size=1280,720', 'about:blank'], { stdio: 'ignore' });
  started.add(ch);
  let p; for (let i = 0; i < 400 && !p; i++) { try { p = fs.readFileSync(`${prof}/DevToolsActivePort`, 'utf8').split('\n'); } catch { await sleep(25); } }
  const b = await puppeteer.connect({ browserWSEndpoint: `ws://127.0.0.1:${p[0]}${p[1]}`, defaultViewport: null });
  const [pg] = await b.pages();
  await sleep(1500); // a warm browser waits at about:blank
  const t = async url => { const t0 = performance.now(); await pg.goto(url, { waitUntil: 'load' }); return performance.now() - t0; };
  const first = await t(`http://127.0.0.1:${port}/a`);
  await sleep(1500);
  const cross = await t(`http://localhost:${port}/b`);
  await sleep(1500);
  const back = await t(`http://127.0.0.1:${port}/c`);
  await sleep(1500);
  const t1 = performance.now(); const np = await b.newPage(); const tab = performance.now() - t1;
  const t2 = performance.now(); await np.goto(`http://localhost:${port}/d`, { waitUntil: 'load' }); const tabnav = performance.now() - t2;
  b.disconnect(); ch.kill('SIGKILL'); await new Promise(r => ch.on('exit', r)); started.delete(ch); fs.rmSync(prof, { recursive: true, force: true });
  return [first, cross, back, tab, tabnav];
}
const variants = [["Cordon's flags (a spare)", []], ['no spare renderer', [`${feats},SpareRendererForSitePerProcess`]]];
const N = +(process.env.N || 9);
const res = variants.map(() => []);
for (let i = 0; i < N; i++) for (const [j, [, x]] of variants.entries()) res[j].push(await run(x));
const med = a => { const s = [...a].sort((x, y) => x - y); return s[s.length >> 1].toFixed(1); };
for (const [j, [name]] of variants.entries()) console.log(`${name.padEnd(22)} first ${med(res[j].map(r => r[0]))} ms  cross-site ${med(res[j].map(r => r[1]))} ms  back ${med(res[j].map(r => r[2]))} ms  new tab ${med(res[j].map(r => r[3]))} ms  its first page ${med(res[j].map(r => r[4]))} ms  (n=${N})`);
srv.close();
