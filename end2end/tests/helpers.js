// Starts a real `cordon serve` on a free loopback port with a fresh data dir,
// and a real Chromium driven by Playwright. Everything started is stopped by
// PID in `stop()`.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
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

/** Starts the server; resolves with `{ url, stop }` once it listens. */
export async function startCordon(dataDir) {
  const child = spawn(cordonBin, ['serve'], {
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
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const url = await new Promise((resolveUrl, reject) => {
    let buf = '';
    const timer = setTimeout(() => reject(new Error(`cordon did not start: ${buf}`)), 30_000);
    child.stderr.on('data', (chunk) => {
      buf += chunk;
      for (const line of buf.split('\n')) {
        try {
          const ev = JSON.parse(line);
          if (ev.addr && String(ev.message).includes('listening')) {
            clearTimeout(timer);
            resolveUrl(`http://${ev.addr}`);
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
  return { url, stop, child };
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
