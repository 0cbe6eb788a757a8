// The agent API's contract, checked from outside against a live Cordon on
// loopback (a loopback page, a loopback model, an API key made with the CLI):
//
// 1. schemathesis (PyPI, pinned in infra/scripts/setup.sh, in
//    end2end/.venv-contract) runs every check (`--checks all`) on every
//    operation of /api/openapi.json, positive and negative data, and
//    follows the document's `links` (session, tab, live link, grant and
//    task ids) into real sessions. A bounded number of examples keeps it
//    near a minute. What is tuned, and why, is in end2end/schemathesis.toml;
//    no check is turned off.
// 2. A client generated from the same document by openapi-python-client
//    (same venv; zero warnings asserted) opens a session, navigates,
//    snapshots, clicks, reads typed errors, asks for a grant and closes
//    (end2end/python/generated_client_check.py).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import http from 'node:http';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cordon, freshDataDir, removeDir, startCordon } from './helpers.js';
import { startSite } from './site.js';

const here = resolve(fileURLToPath(new URL('.', import.meta.url)), '..');
const venv = process.env.CORDON_CONTRACT_VENV || join(here, '.venv-contract');
// Examples per operation and phase; CORDON_CONTRACT_EXAMPLES raises it for a longer run.
const examples = process.env.CORDON_CONTRACT_EXAMPLES || '8';

let dataDir, server, key, site, model, work;

/** A chat-completions endpoint on loopback that always says the task is done. */
function startModel() {
  const srv = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ choices: [{ index: 0, message: { role: 'assistant', content: "Action: finished(content='done')" } }] }));
    });
  });
  return new Promise((r) => srv.listen(0, '127.0.0.1', () => r({
    url: `http://127.0.0.1:${srv.address().port}/v1`,
    stop: () => new Promise((s) => { srv.closeAllConnections(); srv.close(s); }),
  })));
}

/** Runs `file args`; resolves with { code, stdout, stderr, ms }. */
function run(file, args, options = {}) {
  const started = Date.now();
  return new Promise((r) => {
    execFile(file, args, { maxBuffer: 64 << 20, ...options }, (err, stdout, stderr) => {
      r({ code: err ? (err.code ?? 1) : 0, stdout, stderr, ms: Date.now() - started });
    });
  });
}

before(async () => {
  site = await startSite();
  model = await startModel();
  work = mkdtempSync(join(tmpdir(), 'cordon-contract-'));
  dataDir = freshDataDir();
  cordon(dataDir, ['tenant', 'create', 'acme']);
  key = cordon(dataDir, ['apikey', 'create', '--tenant', 'acme', '--label', 'contract']).trim();
  server = await startCordon(dataDir, {
    CORDON_EGRESS_ALLOW: `127.0.0.1:${site.port}`,
    CORDON_MODEL_BASE_URL: model.url,
    // Bounds that keep generated calls short: a tool waits at most 3 s, a
    // session lives at most 20 s, a tenant holds at most 4, and an action
    // the risk gate holds for an operator (a task's start page off its
    // domains) waits 2 s for one.
    CORDON_TOOL_TIMEOUT_S: '3',
    CORDON_SESSION_DEADLINE_S: '20',
    CORDON_SESSION_DEADLINE_MAX_S: '20',
    CORDON_REFRESH_DEADLINE_S: '20',
    CORDON_MAX_SESSIONS_PER_TENANT: '4',
    CORDON_APPROVAL_TIMEOUT_S: '2',
    CORDON_TASK_MAX_STEPS: '3',
  });
});

after(async () => {
  await server?.stop();
  await model?.stop();
  await site?.stop();
  if (dataDir) removeDir(dataDir);
  if (work) removeDir(work);
});

const base = () => server.url.replace('localhost', '127.0.0.1');

test('schemathesis finds nothing: every check, positive and negative data, stateful links', { timeout: 300_000 }, async () => {
  const res = await run(join(venv, 'bin', 'st'), [
    '--config-file', join(here, 'schemathesis.toml'),
    'run', `${base()}/api/openapi.json`,
    '--url', base(),
    '-H', `Authorization: Bearer ${key}`,
    '--checks', 'all',
    '--max-examples', examples,
    '--seed', '20261127',
    '--workers', '1',
    '--request-timeout', '30',
    '--max-failures', '20',
  ], { cwd: work, env: { ...process.env, NO_COLOR: '1' } });
  const out = res.stdout + res.stderr;
  // The key never shows: schemathesis masks Authorization in what it prints.
  assert.ok(!out.includes(key), 'the API key was printed');
  console.log(`schemathesis: ${Math.round(res.ms / 1000)} s\n${out.slice(out.lastIndexOf('SUMMARY'))}`);
  assert.equal(res.code, 0, out.slice(-20_000));
});

test('a client generated from /api/openapi.json drives a session, reads typed errors and asks for a grant', { timeout: 180_000 }, async () => {
  const doc = await (await fetch(`${base()}/api/openapi.json`)).text();
  writeFileSync(join(work, 'openapi.json'), doc);
  writeFileSync(join(work, 'client.yml'), [
    'project_name_override: cordon-client',
    'package_name_override: cordon_client',
    // `press`'s keys hold both `a` and `A`, which an Enum class cannot name apart.
    'literal_enums: true',
    // Formatting the generated code (ruff) is not what is checked here.
    'post_hooks: []',
    '',
  ].join('\n'));
  const gen = await run(join(venv, 'bin', 'openapi-python-client'), [
    'generate', '--path', join(work, 'openapi.json'), '--output-path', join(work, 'client'),
    '--config', join(work, 'client.yml'), '--overwrite',
  ], { cwd: work });
  const genOut = gen.stdout + gen.stderr;
  assert.equal(gen.code, 0, genOut);
  assert.doesNotMatch(genOut, /warning|unable to|error/i, `the generator warned:\n${genOut}`);
  console.log(`openapi-python-client: ${Math.round(gen.ms / 1000)} s`);

  // schemathesis leaves sessions open (each lives up to 20 s): closed
  // first, so this check has the tenant's room whatever it generated.
  const auth = { authorization: `Bearer ${key}` };
  const open = await (await fetch(`${base()}/api/sessions?limit=500`, { headers: auth })).json();
  for (const s of open) {
    if (s.state === 'ready' || s.state === 'starting') {
      await fetch(`${base()}/api/sessions/${s.session_id}`, { method: 'DELETE', headers: auth });
    }
  }
  const drive = await run(join(venv, 'bin', 'python'), [
    join(here, 'python', 'generated_client_check.py'), join(work, 'client'), base(), site.url('/login'),
  ], { env: { ...process.env, CORDON_KEY: key }, timeout: 120_000 });
  assert.equal(drive.code, 0, drive.stdout + drive.stderr);
  const seen = JSON.parse(drive.stdout.trim().split('\n').pop());
  assert.equal(seen.title, 'Sign in');
  assert.equal(seen.click, 200, JSON.stringify(seen));
  assert.equal(seen.missing, 'element_not_found');
  assert.equal(seen.grant_status, 201);
  assert.equal(seen.grant_state, 'pending');
  assert.equal(seen.closed, 'closed');
  assert.equal(seen.after_close, 'gone');
});
