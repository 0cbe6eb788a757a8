// browser-use (PyPI, the venv infra/scripts/setup.sh makes) against a
// session's CDP endpoint: with the API key as a header, and with a
// single-use token URL (which it cannot use twice). The Python side is
// end2end/python/browser_use_check.py; no model is involved. Each run is
// audited as the agent, via cdp.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { agentApi, cordon, freshDataDir, removeDir, startCordon } from './helpers.js';
import { startSite } from './site.js';

const here = resolve(fileURLToPath(new URL('.', import.meta.url)), '..');
const python = process.env.CORDON_E2E_PYTHON || join(here, '.venv', 'bin', 'python');
const script = join(here, 'python', 'browser_use_check.py');

let dataDir, server, key, site;

before(async () => {
  site = await startSite();
  dataDir = freshDataDir();
  cordon(dataDir, ['tenant', 'create', 'acme']);
  key = cordon(dataDir, ['apikey', 'create', '--tenant', 'acme', '--label', 'browser-use']).trim();
  server = await startCordon(dataDir, { CORDON_EGRESS_ALLOW: `127.0.0.1:${site.port}` });
});

after(async () => {
  await server?.stop();
  await site?.stop();
  if (dataDir) removeDir(dataDir);
});

const api = (method, path, body) => agentApi(server.url, key, method, path, body);

/** Runs the Python check; answers what it printed (parsed) or throws with its stderr. */
function check(cdpUrl, env = {}) {
  return new Promise((resolveRun, reject) => {
    execFile(python, [script, cdpUrl, site.url('/cdp-page'), site.url('/data')], {
      env: { ...process.env, ANONYMIZED_TELEMETRY: 'false', BROWSER_USE_CLOUD_SYNC: 'false', ...env },
      timeout: 120_000,
    }, (err, stdout, stderr) => {
      if (err) return reject(new Error(`browser-use check failed (${err.code}): ${stderr.slice(-3000)}`));
      const line = stdout.trim().split('\n').pop();
      try { return resolveRun(JSON.parse(line)); } catch { return reject(new Error(`no result: ${stdout} ${stderr.slice(-2000)}`)); }
    });
  });
}

test('browser-use connects with the key as a header, navigates, types, clicks, screenshots, opens a tab', async () => {
  const opened = await api('POST', '/api/sessions', {});
  assert.equal(opened.status, 201, JSON.stringify(opened.json));
  const { session_id: sid, cdp_url: cdpUrl } = opened.json;
  const seen = await check(cdpUrl.replace(/^ws/, 'http'), { CORDON_KEY: key });
  assert.equal(seen.url, site.url('/cdp-page'));
  assert.equal(seen.title, 'saved from browser-use');
  assert.ok(seen.screenshot_bytes > 1000, JSON.stringify(seen));
  assert.equal(seen.second_url, site.url('/data'));
  assert.ok(seen.tabs >= 2, JSON.stringify(seen));
  // The session outlives the client, and what it did is the agent's, via CDP.
  const shown = await api('GET', `/api/sessions/${sid}`);
  assert.equal(shown.json.state, 'ready', JSON.stringify(shown.json));
  await api('DELETE', `/api/sessions/${sid}`);
});

test('browser-use with a single-use token URL: works once, refused after', async () => {
  const opened = await api('POST', '/api/sessions', {});
  const sid = opened.json.session_id;
  const tok = await api('POST', `/api/sessions/${sid}/cdp_token`);
  assert.equal(tok.status, 201, JSON.stringify(tok.json));
  const seen = await check(tok.json.cdp_url);
  assert.equal(seen.title, 'saved from browser-use');
  // Used up: browser-use reports the refused connection.
  const again = await check(tok.json.cdp_url);
  assert.match(again.refused, /401/, JSON.stringify(again));
  assert.equal(again.title, undefined);
  await api('DELETE', `/api/sessions/${sid}`);
});
