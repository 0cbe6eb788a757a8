// Playwright's page.click through Cordon's CDP endpoint against the same
// on a Chromium with Cordon's headless flags, connected directly; the two
// alternate, click for click. Not a test: `node end2end/bench/cdp-click.mjs`
// (env CORDON_BIN, default target/release/cordon; BENCH_CLICKS, default 300).
// Prints p50/p95 of each and the added p50; BENCHMARKS.md keeps the figures.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { agentApi, cordon, freshDataDir, removeDir, startCordon } from '../tests/helpers.js';

const root = resolve(fileURLToPath(new URL('.', import.meta.url)), '..', '..');
process.env.CORDON_BIN ||= join(root, 'target', 'release', 'cordon');
const clicks = Number(process.env.BENCH_CLICKS || 300);

const page = `<!doctype html><title>0</title><button id="b" style="position:absolute;left:40px;top:40px;width:200px;height:50px"
 onclick="document.title = String(Number(document.title) + 1)">Count</button>`;
const site = createServer((req, res) => { res.writeHead(200, { 'content-type': 'text/html' }); res.end(page); });
await new Promise((r) => site.listen(0, '127.0.0.1', r));
const siteUrl = `http://127.0.0.1:${site.address().port}/`;

// Direct: Debian's Chromium with the sandbox's headless flags, its own DevTools port.
const profile = mkdtempSync(join(tmpdir(), 'cdp-bench-'));
const direct = spawn('/usr/bin/chromium', ['--headless', '--disable-gpu', '--no-first-run', '--no-sandbox',
  '--disable-background-networking', '--disable-component-update', '--disable-sync', '--mute-audio',
  '--hide-scrollbars', '--remote-debugging-address=127.0.0.1', '--remote-debugging-port=0',
  '--window-size=1280,720', `--user-data-dir=${profile}`, 'about:blank'], { stdio: ['ignore', 'ignore', 'pipe'] });
// Whatever happens below, the browser started here stops with this process.
process.on('exit', () => direct.kill('SIGTERM'));
const directWs = await new Promise((r) => {
  let buf = '';
  direct.stderr.on('data', (c) => { buf += c; const m = buf.match(/ws:\/\/\S+/); if (m) r(m[0]); });
});

const dataDir = freshDataDir();
cordon(dataDir, ['tenant', 'create', 'bench', '--name', 'Bench']);
const key = cordon(dataDir, ['apikey', 'create', '--tenant', 'bench', '--label', 'bench']).trim();
let server;
try {
  server = await startCordon(dataDir, { CORDON_EGRESS_ALLOW: `127.0.0.1:${site.address().port}` });
  const opened = await agentApi(server.url, key, 'POST', '/api/sessions', { record: 'off' });
  const through = await chromium.connectOverCDP(opened.json.cdp_url, { headers: { Authorization: `Bearer ${key}` } });
  const raw = await chromium.connectOverCDP(directWs);
  const pages = [];
  for (const b of [raw, through]) {
    const ctx = b.contexts()[0];
    const p = ctx.pages()[0] ?? await ctx.newPage();
    await p.goto(siteUrl);
    for (let i = 0; i < 30; i++) await p.click('#b');
    pages.push(p);
  }
  const times = [[], []];
  for (let i = 0; i < clicks; i++) {
    for (const k of [0, 1]) {
      const t = process.hrtime.bigint();
      await pages[k].click('#b');
      times[k].push(Number(process.hrtime.bigint() - t) / 1e6);
    }
  }
  const pct = (a, p) => { const s = [...a].sort((x, y) => x - y); return s[Math.round((s.length - 1) * p)]; };
  const show = (a) => `p50 ${pct(a, 0.5).toFixed(2)} ms  p95 ${pct(a, 0.95).toFixed(2)} ms  (n=${a.length})`;
  console.log(`playwright page.click, alternating, ${clicks} each:`);
  console.log(`  direct          ${show(times[0])}`);
  console.log(`  through Cordon  ${show(times[1])}`);
  console.log(`  added p50 ${(pct(times[1], 0.5) - pct(times[0], 0.5)).toFixed(2)} ms`);
  console.log(`  titles: ${await pages[0].title()} / ${await pages[1].title()}`);
  await raw.close();
  await through.close();
} finally {
  await server?.stop();
  direct.kill('SIGTERM');
  site.close();
  removeDir(dataDir);
  rmSync(profile, { recursive: true, force: true });
}
