// The dashboard's first load over a slow link: the Overview, logged in,
// with an empty cache, until the page is hydrated, through Chromium's
// network emulation (BENCH_MBIT, default 10 Mbit/s both ways; BENCH_RTT_MS,
// default 40 ms). Not a test: `node end2end/bench/first-load.mjs`.
//
// env: CORDON_BIN (default target/debug/cordon) and, to compare, BENCH_OLD_BIN
// (another build's binary, e.g. one from before a change; the two alternate
// load for load; BENCH_OLD_SITE its site, default the same); CORDON_SITE_ROOT (default target/site: built by
// infra/scripts/build-site.sh, debug or release); BENCH_LOADS (default 5
// per binary). Prints, per binary, the p50 and each load's time and the
// bytes that crossed the link; BENCHMARKS.md keeps the figures.
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { enroll, freshDataDir, operatorPage, removeDir, startCordon } from '../tests/helpers.js';

const root = resolve(fileURLToPath(new URL('.', import.meta.url)), '..', '..');
const site = process.env.CORDON_SITE_ROOT || join(root, 'target', 'site');
const bins = [['new', process.env.CORDON_BIN || join(root, 'target', 'debug', 'cordon'), site]];
if (process.env.BENCH_OLD_BIN) bins.unshift(['old', process.env.BENCH_OLD_BIN, process.env.BENCH_OLD_SITE || site]);
const loads = Number(process.env.BENCH_LOADS || 5);
const mbit = Number(process.env.BENCH_MBIT || 10);
const rtt = Number(process.env.BENCH_RTT_MS || 40);

/** `cordon serve` from `bin` on a fresh data dir, serving `siteRoot`. */
async function serve(bin, siteRoot) {
  const dataDir = freshDataDir();
  const server = await startCordon(dataDir, { CORDON_SITE_ROOT: siteRoot, CORDON_POOL_SIZE: '0' }, bin);
  const stop = server.stop;
  server.stop = async () => { await stop(); removeDir(dataDir); };
  return server;
}

/** An admin's dashboard cookies, from a passkey enrollment in a virtual authenticator. */
async function login(browser, server) {
  const { context, page } = await operatorPage(browser);
  await enroll(page, server.enrollLink, server.url);
  const cookies = await context.cookies();
  await context.close();
  return cookies;
}

/** One load of the Overview: ms until hydrated, and bytes received. The
 * first load of a fresh context with the cache off; `repeat`: the second
 * load of a context whose cache the first filled (a later visit). */
async function firstLoad(browser, server, cookies, repeat = false) {
  const context = await browser.newContext();
  await context.addCookies(cookies);
  const page = await context.newPage();
  const cdp = await context.newCDPSession(page);
  await cdp.send('Network.enable');
  await cdp.send('Network.setCacheDisabled', { cacheDisabled: !repeat });
  await cdp.send('Network.emulateNetworkConditions', {
    offline: false,
    latency: rtt,
    downloadThroughput: (mbit * 1e6) / 8,
    uploadThroughput: (mbit * 1e6) / 8,
  });
  if (repeat) {
    await page.goto(`${server.url}/`, { waitUntil: 'commit', timeout: 300_000 });
    await page.waitForSelector('body[data-hydrated="true"]', { timeout: 300_000 });
  }
  let bytes = 0;
  cdp.on('Network.loadingFinished', (e) => { bytes += e.encodedDataLength; });
  const started = performance.now();
  await page.goto(`${server.url}/`, { waitUntil: 'commit', timeout: 300_000 });
  await page.waitForSelector('body[data-hydrated="true"]', { timeout: 300_000 });
  const ms = performance.now() - started;
  await context.close();
  return { ms, bytes };
}

const browser = await chromium.launch({ executablePath: process.env.CORDON_E2E_CHROMIUM || '/usr/bin/chromium' });
const servers = [];
try {
  for (const [name, bin, siteRoot] of bins) {
    const server = await serve(bin, siteRoot);
    servers.push(server);
    const cookies = await login(browser, server);
    server.name = name;
    server.site = siteRoot;
    server.cookies = cookies;
    server.loads = [];
    server.repeats = [];
    await firstLoad(browser, server, cookies); // warm the server's own caches
  }
  for (let i = 0; i < loads; i++) {
    for (const s of servers) s.loads.push(await firstLoad(browser, s, s.cookies));
    for (const s of servers) s.repeats.push(await firstLoad(browser, s, s.cookies, true));
  }
  console.log(`first load of the Overview, ${mbit} Mbit/s, ${rtt} ms RTT, empty cache, until hydrated`);
  for (const s of servers) {
    for (const [what, list] of [['first load', s.loads], ['a later visit', s.repeats]]) {
      const ms = list.map((l) => l.ms).sort((a, b) => a - b);
      const p50 = ms[Math.floor(ms.length / 2)];
      const kb = Math.round(list[0].bytes / 1024);
      console.log(`${s.name} (${s.site}), ${what}: p50 ${p50.toFixed(0)} ms over ${ms.length} loads (${ms.map((m) => m.toFixed(0)).join(', ')}), ${kb} KiB received`);
    }
  }
} finally {
  await browser.close();
  for (const s of servers) await s.stop();
}
