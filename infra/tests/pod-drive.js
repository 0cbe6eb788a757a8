// Node half of infra/tests/pod-container.sh (run with NODE_PATH at
// end2end/node_modules):
//   node pod-drive.js cdp  <http://127.0.0.1:port> <out.png>
//     drives the container's Chromium over CDP directly (playwright-core):
//     a page from a data: URL, a screenshot, the page and browser closed;
//   node pod-drive.js live <ws://…/embed/<session>/ws?link=…> <out.jpg>
//     the live view of a Cordon session: waits for its first JPEG frame.
'use strict';
const fs = require('node:fs');

async function cdp(endpoint, out) {
  const { chromium } = require('playwright-core');
  const browser = await chromium.connectOverCDP(endpoint, { timeout: 20_000 });
  const version = browser.version();
  const context = browser.contexts()[0] ?? (await browser.newContext());
  const page = await context.newPage();
  const html = '<title>pod check</title><h1 style="font:48px sans-serif">Hello from the pod</h1>';
  await page.goto(`data:text/html,${encodeURIComponent(html)}`);
  const heading = await page.textContent('h1');
  if (heading !== 'Hello from the pod') throw new Error(`unexpected heading ${heading}`);
  // What the page sees of its process: the pod's user agent and screen.
  const seen = await page.evaluate(() => ({ ua: navigator.userAgent, w: innerWidth, h: innerHeight }));
  const png = await page.screenshot();
  if (png.subarray(0, 8).toString('hex') !== '89504e470d0a1a0a') throw new Error('the screenshot is not a PNG');
  fs.writeFileSync(out, png);
  await page.close();
  // Browser.close over CDP ends Chromium itself (and with it the container).
  const session = await browser.newBrowserCDPSession();
  await session.send('Browser.close').catch(() => {});
  await browser.close().catch(() => {});
  console.log(JSON.stringify({ version, heading, screenshot_bytes: png.length, viewport: `${seen.w}x${seen.h}` }));
}

async function live(url, out) {
  const WebSocket = require('ws');
  const ws = new WebSocket(url, { headers: { Origin: new URL(url).origin.replace(/^ws/, 'http') } });
  const frame = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no live view frame within 20 s')), 20_000);
    ws.on('message', (data, isBinary) => {
      if (isBinary) {
        clearTimeout(timer);
        resolve(Buffer.from(data));
      }
    });
    ws.on('unexpected-response', (_req, res) => reject(new Error(`live view socket: HTTP ${res.statusCode}`)));
    ws.on('error', reject);
  });
  ws.close();
  if (frame.subarray(0, 2).toString('hex') !== 'ffd8') throw new Error('the live view frame is not a JPEG');
  fs.writeFileSync(out, frame);
  console.log(JSON.stringify({ live_frame_bytes: frame.length }));
}

const [mode, target, out] = process.argv.slice(2);
const run = { cdp, live }[mode];
if (!run || !target || !out) {
  console.error('usage: node pod-drive.js cdp|live <endpoint> <out file>');
  process.exit(64);
}
run(target, out).then(
  () => process.exit(0),
  (e) => {
    console.error(`pod-drive ${mode}: ${e.message}`);
    process.exit(1);
  },
);
