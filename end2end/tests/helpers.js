// Starts a real `cordon serve` on a free loopback port with a fresh data dir,
// and a real Chromium driven by Playwright. Everything started is stopped by
// PID in `stop()`.
import { spawn, execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const root = resolve(fileURLToPath(new URL('.', import.meta.url)), '..', '..');
const targetDir = process.env.CARGO_TARGET_DIR || join(root, 'target');
export const cordonBin = process.env.CORDON_BIN || join(targetDir, 'debug', 'cordon');

/** Runs a `cordon` subcommand against `dataDir` and returns its stdout. */
export function cordon(dataDir, args) {
  return execFileSync(cordonBin, args, {
    cwd: root,
    env: { ...process.env, CORDON_DATA_DIR: dataDir, CORDON_LOG_LEVEL: 'warn', CORDON_EGRESS_RESOLVER: 'loopback-only' },
    encoding: 'utf8',
  });
}

/** A fresh data dir. */
export function freshDataDir() {
  return mkdtempSync(join(tmpdir(), 'cordon-e2e-'));
}

/** Starts the server; resolves with `{ url, enrollLink, stop }` once it
 * listens. `url` uses `localhost` (passkeys need a host name); `enrollLink`
 * is the first admin's one-time link `serve` printed, if it printed one.
 * `bin`: another build's binary (the benches compare two). */
export async function startCordon(dataDir, env = {}, bin = cordonBin) {
  const child = spawn(bin, ['serve'], {
    cwd: root,
    env: {
      ...process.env,
      CORDON_DATA_DIR: dataDir,
      CORDON_BIND: '127.0.0.1:0',
      CORDON_LOG_FORMAT: 'json',
      CORDON_LOG_LEVEL: 'info',
      // No DNS query may leave the machine from the test's browsers.
      CORDON_EGRESS_RESOLVER: 'loopback-only',
      CORDON_POOL_SIZE: '1',
      CORDON_SITE_ROOT: join(root, 'target', 'site'),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => { stdout += chunk; });
  child.stderr.on('data', (chunk) => { stderr += chunk; });
  const url = await new Promise((resolveUrl, reject) => {
    let buf = '';
    // A server that does not start is stopped: nothing it started outlives the test.
    const timer = setTimeout(() => { child.kill('SIGTERM'); reject(new Error(`cordon did not start: ${buf}`)); }, 30_000);
    child.stderr.on('data', (chunk) => {
      buf += chunk;
      for (const line of buf.split('\n')) {
        try {
          const ev = JSON.parse(line);
          if (ev.addr && String(ev.message).includes('listening')) {
            clearTimeout(timer);
            resolveUrl(`http://localhost:${ev.addr.split(':').pop()}`);
          }
        } catch { /* partial line */ }
      }
    });
    child.on('exit', (code) => reject(new Error(`cordon exited with ${code}: ${buf}`)));
  });
  const stop = async () => {
    if (child.exitCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
  };
  // The link is printed before "listening"; give stdout a moment to arrive.
  const deadline = Date.now() + 5_000;
  while (!/enroll#/.test(stdout) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  const enrollLink = stdout.match(/http:\/\/\S+\/enroll#\S+/)?.[0];
  // Everything the server logged (its JSON log and stdout), for tests
  // that check no secret reached the log.
  const logs = () => stderr + stdout;
  return { url, stop, child, enrollLink, logs };
}

/** Runs `body`; when it fails, prints the last lines of the server's log
 * first (which requests arrived, and how they ended) so a failure in CI can
 * be read without a rerun. The log holds no secret (tests check that). */
export async function withServerLog(server, body, lines = 80) {
  try {
    return await body();
  } catch (e) {
    const tail = server.logs().trimEnd().split('\n').slice(-lines).join('\n');
    console.log(`--- the server's last ${lines} log lines ---\n${tail}\n--- end of the server's log ---`);
    throw e;
  }
}

/** Launches Debian's Chromium through Playwright. */
export async function launchBrowser() {
  return chromium.launch({
    executablePath: process.env.CORDON_E2E_CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
}

/** Removes a data dir made by `freshDataDir`. */
export function removeDir(dir) {
  rmSync(dir, { recursive: true, force: true });
}

/** A browser context whose page has a virtual passkey authenticator (CDP
 * `WebAuthn.addVirtualAuthenticator`) that says yes to every prompt. */
export async function operatorPage(browser) {
  const context = await browser.newContext();
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e));
  // A script or style the dashboard's Content Security Policy refused.
  page.on('console', (m) => {
    if (m.type() === 'error' && /Content Security Policy/i.test(m.text())) errors.push(new Error(m.text()));
  });
  const cdp = await context.newCDPSession(page);
  await cdp.send('WebAuthn.enable');
  const authenticatorId = await addAuthenticator(cdp);
  return { context, page, errors, cdp, authenticatorId };
}

/** Adds a virtual authenticator (a new device) to a page; answers its id. */
export async function addAuthenticator(cdp) {
  const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
    options: {
      protocol: 'ctap2', transport: 'internal', hasResidentKey: true,
      hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true,
    },
  });
  return authenticatorId;
}

/** Opens an enrollment link, creates a passkey, and waits until logged in. */
export async function enroll(page, link, origin) {
  await page.goto(link);
  // What the page still waits for, if its load never comes (paths only:
  // the link's secret is in its fragment, which no request carries).
  const pending = new Map();
  const started = (r) => pending.set(r, Date.now());
  const ended = (r) => pending.delete(r);
  page.on('request', started);
  page.on('requestfinished', ended);
  page.on('requestfailed', ended);
  try {
    await page.click('#enroll-submit');
    await page.waitForURL(`${origin}/`, { timeout: 30_000 });
    await page.waitForSelector('#whoami', { timeout: 30_000 });
  } catch (e) {
    const now = Date.now();
    const open = [...pending].map(([r, t]) => `${r.method()} ${new URL(r.url()).pathname} (${now - t} ms)`);
    const state = await page.evaluate(() => document.readyState).catch((err) => `unknown: ${err.message}`);
    console.log(`enroll: the page did not finish loading; readyState ${state}; requests still open: ${open.join(', ') || 'none'}`);
    throw e;
  } finally {
    page.off('request', started);
    page.off('requestfinished', ended);
    page.off('requestfailed', ended);
  }
}

/** Logs in as `name` with the page's passkey. */
export async function login(page, origin, name) {
  await page.goto(`${origin}/login`);
  await page.fill('#login-name', name);
  await page.click('#login-submit');
  await page.waitForURL(`${origin}/`, { timeout: 30_000 });
  await page.waitForSelector('#whoami', { timeout: 30_000 });
}

/** Waits for a page to be hydrated and its change stream to be up. */
export async function live(page) {
  await page.waitForSelector('body[data-hydrated="true"]', { timeout: 30_000 });
  await page.waitForSelector('body[data-live="true"]', { timeout: 30_000 });
}

/** Calls a server function the way a page does (form-encoded POST) with
 * the page's cookies and Origin; answers `{ status, body }`. */
export async function serverFn(page, name, fields, origin) {
  return page.evaluate(async ([name, fields]) => {
    const res = await fetch(`/ui/fn/${name}`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(fields).toString(),
    });
    return { status: res.status, body: await res.text() };
  }, [name, fields, origin]);
}

/** The agent API with a bearer key. */
export async function agentApi(url, key, method, path, body) {
  const res = await fetch(url + path, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json;
  try { json = JSON.parse(text); } catch { json = text; }
  return { status: res.status, json };
}

/** Polls `check` (async, returns a truthy value when done) until `ms`. */
export async function waitFor(what, check, ms = 30_000) {
  const deadline = Date.now() + ms;
  let last;
  while (Date.now() < deadline) {
    last = await check();
    if (last) return last;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}; last: ${JSON.stringify(last)}`);
}

/** Saves `docs/screenshots/<name>.png` for the operators' guide (docs/dashboard.md)
 * when `CORDON_E2E_SCREENSHOTS` is set; otherwise does nothing. */
export async function shot(page, name, { fullPage = false } = {}) {
  if (!process.env.CORDON_E2E_SCREENSHOTS) return;
  const dir = join(root, 'docs', 'screenshots');
  mkdirSync(dir, { recursive: true });
  await page.screenshot({ path: join(dir, `${name}.png`), fullPage });
}
