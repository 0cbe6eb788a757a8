// The CDP endpoint with the real clients: Playwright's connectOverCDP (by
// the ws:// URL with the key as a header, and by the http:// URL through
// /json/version) and Puppeteer's connect (a single-use token URL). They
// connect, open pages, navigate, click, type, screenshot, evaluate, route
// requests, see a download refused by the session's policy, disconnect
// and reconnect; on an operator-mode session `context.cookies()` is
// refused while the page itself is logged in. Cookie values are compared,
// never printed.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import puppeteer from 'puppeteer-core';
import {
  agentApi, cordon, freshDataDir, removeDir, startCordon, waitFor,
} from './helpers.js';
import { startSite, USER, PASSWORD } from './site.js';

let dataDir, server, key, site;

/** Logs in to the site over HTTP and answers its session cookie's value. */
async function siteLogin() {
  const form = await fetch(site.url('/login'));
  const csrfCookie = form.headers.get('set-cookie').split(';')[0];
  const csrf = csrfCookie.split('=')[1];
  const res = await fetch(site.url('/login'), {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: csrfCookie },
    body: new URLSearchParams({ csrf, user: USER, pass: PASSWORD }).toString(),
  });
  assert.equal(res.status, 302);
  return res.headers.get('set-cookie').split(';')[0].split('=')[1];
}

before(async () => {
  site = await startSite();
  dataDir = freshDataDir();
  cordon(dataDir, ['tenant', 'create', 'acme', '--name', 'Acme Corp']);
  key = cordon(dataDir, ['apikey', 'create', '--tenant', 'acme', '--label', 'cdp agent']).trim();
  const cookies = join(dataDir, 'cookies.json');
  writeFileSync(cookies, JSON.stringify([{
    name: 'sessionid', value: await siteLogin(), domain: '127.0.0.1', path: '/',
    expires: -1, httpOnly: true, secure: false, sameSite: 'Lax',
  }]));
  cordon(dataDir, ['creds', 'import', '--tenant', 'acme', '--domain', '127.0.0.1', cookies]);
  server = await startCordon(dataDir, { CORDON_EGRESS_ALLOW: `127.0.0.1:${site.port}` });
});

after(async () => {
  await server?.stop();
  await site?.stop();
  if (dataDir) removeDir(dataDir);
});

/** The HTTP status a WebSocket upgrade to `url` gets (101 if it upgrades). */
function upgradeStatus(url) {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url.replace(/^ws/, 'http'), {
      headers: { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==' },
    });
    req.on('response', (res) => { res.resume(); resolve(res.statusCode); });
    req.on('upgrade', (res, socket) => { socket.destroy(); resolve(101); });
    req.on('error', reject);
    req.end();
  });
}

const api = (method, path, body) => agentApi(server.url, key, method, path, body);
const auth = () => ({ Authorization: `Bearer ${key}` });

test('Playwright drives a session over CDP: pages, input, routes, downloads refused, reconnect', async () => {
  const opened = await api('POST', '/api/sessions', {});
  assert.equal(opened.status, 201, JSON.stringify(opened.json));
  const { session_id: sid, cdp_url: cdpUrl } = opened.json;
  assert.match(cdpUrl, new RegExp(`^ws://localhost:\\d+/cdp/${sid}$`));

  const browser = await chromium.connectOverCDP(cdpUrl, { headers: auth() });
  const context = browser.contexts()[0];
  const page = context.pages()[0] ?? await context.newPage();
  await page.goto(site.url('/cdp-page'));
  await page.waitForFunction(() => document.getElementById('data').textContent === 'real data');
  await page.fill('#name', 'ada');
  await page.click('#save');
  assert.equal(await page.title(), 'saved ada');
  assert.equal(await page.evaluate(() => 6 * 7), 42);
  const png = await page.screenshot();
  assert.ok(png.length > 1000 && png.subarray(1, 4).toString() === 'PNG');

  // Request interception.
  await page.route('**/data', (route) => route.fulfill({ status: 200, body: 'mocked data' }));
  await page.reload();
  await page.waitForFunction(() => document.getElementById('data').textContent === 'mocked data');
  await page.unroute('**/data');

  // A second tab, seen by the tool API too.
  const second = await context.newPage();
  await second.goto(site.url('/danger'));
  assert.equal(await second.title(), 'Danger');
  await waitFor('the tool API to list both tabs', async () => {
    const tabs = await api('GET', `/api/sessions/${sid}/tabs`);
    return tabs.json.length === 2 && tabs.json.some((t) => t.title === 'Danger') && tabs.json;
  });
  await second.close();

  // Downloads follow the session (denied): no file reaches anybody.
  const download = page.waitForEvent('download', { timeout: 10_000 }).catch(() => null);
  await page.click('#dl');
  const dl = await download;
  if (dl) assert.notEqual(await dl.failure(), null, 'the download did not complete');
  const listed = await api('GET', `/api/sessions/${sid}/downloads`);
  assert.equal(listed.status, 409, JSON.stringify(listed.json));

  // Disconnect and reconnect, by the http:// discovery URL this time.
  await browser.close();
  const info = await api('GET', `/api/sessions/${sid}`);
  assert.equal(info.json.state, 'ready', 'disconnecting leaves the session open');
  const again = await chromium.connectOverCDP(cdpUrl.replace(/^ws/, 'http'), { headers: auth() });
  const back = again.contexts()[0].pages().find((p) => p.url().includes('/cdp-page'));
  assert.ok(back, `the page is still there: ${again.contexts()[0].pages().map((p) => p.url())}`);
  assert.equal(await back.textContent('#data'), 'mocked data', 'the same document, as the first connection left it');
  await again.close();

  await api('DELETE', `/api/sessions/${sid}`);
});

test('Puppeteer connects with a single-use token URL', async () => {
  const opened = await api('POST', '/api/sessions', {});
  assert.equal(opened.status, 201);
  const sid = opened.json.session_id;
  const tok = await api('POST', `/api/sessions/${sid}/cdp_token`);
  assert.equal(tok.status, 201, JSON.stringify(tok.json));
  const browser = await puppeteer.connect({ browserWSEndpoint: tok.json.cdp_url, defaultViewport: null });
  const [page] = await browser.pages();
  await page.goto(site.url('/cdp-page'));
  await page.type('#name', 'grace');
  await page.click('#save');
  await page.waitForFunction(() => document.title === 'saved grace');
  assert.equal(await page.evaluate(() => document.title), 'saved grace');
  const shot = await page.screenshot({ type: 'jpeg' });
  assert.ok(shot.length > 1000);
  await browser.disconnect();
  // The token worked once: the upgrade is refused (401) the second time.
  assert.equal(await upgradeStatus(tok.json.cdp_url), 401);
  await assert.rejects(puppeteer.connect({ browserWSEndpoint: tok.json.cdp_url }));
  await api('DELETE', `/api/sessions/${sid}`);
});

test('on an operator-mode session Playwright cannot read the injected cookies', async () => {
  const req = await api('POST', '/api/grants/requests', { domains: ['127.0.0.1'], reason: 'cdp e2e', cdp: true });
  assert.equal(req.status, 201, JSON.stringify(req.json));
  cordon(dataDir, ['grants', 'approve', req.json.request_id, '--expires-min', '5']);
  const granted = await waitFor('the grant token', async () => {
    const r = await api('GET', `/api/grants/requests/${req.json.request_id}`);
    return r.json.grant_token;
  });
  const opened = await api('POST', '/api/sessions', {
    credential_mode: 'operator', domains: ['127.0.0.1'], grant_token: granted,
  });
  assert.equal(opened.status, 201, JSON.stringify(opened.json));
  const browser = await chromium.connectOverCDP(opened.json.cdp_url, { headers: auth() });
  const context = browser.contexts()[0];
  const page = context.pages()[0];
  await page.goto(site.url('/cdp-page'));
  assert.equal(await page.textContent('#who'), `user ${USER}`, 'the page is logged in');
  const refused = await context.cookies().then(() => null, (e) => e.message);
  // How Playwright reports it (docs/cdp.md quotes this).
  assert.match(refused ?? 'cookies were returned',
    /Protocol error \(Storage\.getCookies\): Cordon refused Storage\.getCookies \(vault_sealed\)/);
  await browser.close();
  await api('DELETE', `/api/sessions/${opened.json.session_id}`);
});
