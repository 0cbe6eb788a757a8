// Tasks on the dashboard, end to end: an agent's task whose model calls
// for a person (`call_user()`) shows on the Tasks page with a badge on
// every page; the operator follows its link to the live view, takes
// control, hands back, and the task goes on to finish. The model is a
// small chat-completions server on loopback (no model runs here).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import {
  shot, agentApi, cordon, enroll, freshDataDir, launchBrowser, live, operatorPage, removeDir,
  startCordon, waitFor,
} from './helpers.js';
import { startSite } from './site.js';

let dataDir, server, browser, admin, key, site, model;

/** Answers `call_user()` first, then `finished`. */
function startModel() {
  const answers = ['Thought: a person must do this.\nAction: call_user()', "Action: finished(content='done with help')"];
  let n = 0;
  const srv = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const content = answers[Math.min(n++, answers.length - 1)];
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ choices: [{ index: 0, message: { role: 'assistant', content } }] }));
    });
  });
  return new Promise((resolve) => srv.listen(0, '127.0.0.1', () => resolve({
    url: `http://127.0.0.1:${srv.address().port}/v1`,
    stop: () => new Promise((r) => srv.close(r)),
  })));
}

before(async () => {
  site = await startSite();
  model = await startModel();
  dataDir = freshDataDir();
  cordon(dataDir, ['tenant', 'create', 'acme', '--name', 'Acme Corp']);
  key = cordon(dataDir, ['apikey', 'create', '--tenant', 'acme', '--label', 'e2e agent']).trim();
  server = await startCordon(dataDir, {
    CORDON_EGRESS_ALLOW: `127.0.0.1:${site.port}`,
    CORDON_MODEL_BASE_URL: model.url,
  });
  browser = await launchBrowser();
  admin = await operatorPage(browser);
  await admin.page.setViewportSize({ width: 1280, height: 900 });
  await enroll(admin.page, server.enrollLink, server.url);
});

after(async () => {
  await browser?.close();
  await server?.stop();
  await model?.stop();
  await site?.stop();
  if (dataDir) removeDir(dataDir);
});

test('a task that calls for a person waits on the Tasks page until an operator helps in the live view', async () => {
  const { page, errors } = admin;
  await page.goto(server.url + '/tasks');
  await live(page);
  await page.waitForSelector('#no-tasks');
  assert.equal(await page.locator('#tasks-badge').count(), 0);
  await shot(page, 'tasks-empty');

  // The agent's call waits for the whole task.
  const run = agentApi(server.url, key, 'POST', '/api/tasks', {
    instruction: 'solve the captcha on the pad', start_url: site.url('/pad'),
  });
  const card = page.locator('#waiting-tasks [data-task]');
  await card.waitFor({ timeout: 60_000 });
  await page.waitForSelector('#tasks-badge', { timeout: 30_000 });
  assert.equal((await page.textContent('#tasks-badge')).trim(), '1');
  assert.match(await card.textContent(), /asked for a person/);
  await shot(page, 'tasks-waiting', { fullPage: true });
  await page.setViewportSize({ width: 390, height: 844 });
  await shot(page, 'tasks-waiting-phone', { fullPage: true });
  await page.setViewportSize({ width: 1280, height: 900 });

  // The card leads to the live view: take control, hand back.
  await card.locator('a.button').click();
  await page.waitForURL(/\/sessions\/[^/]+\/live$/);
  const state = () => page.evaluate(() => {
    const v = document.querySelector('[data-live-view]');
    return v && { ...v.dataset };
  });
  await waitFor('the stream', async () => {
    const s = await state();
    return s?.state === 'live' && Number(s.frames) > 0 ? s : null;
  }, 60_000);
  await page.click('[data-take]');
  await waitFor('control', async () => (await state())?.control === 'yours');
  await page.click('[data-release]');

  const done = await run;
  assert.equal(done.status, 200, JSON.stringify(done.json));
  assert.equal(done.json.status, 'finished', JSON.stringify(done.json));
  assert.equal(done.json.summary, 'done with help');

  // Back on the Tasks page: nothing waits; the task is listed as finished.
  await page.goto(server.url + '/tasks');
  await live(page);
  const row = page.locator(`#tasks [data-task="${done.json.task_id}"]`);
  await row.waitFor({ timeout: 30_000 });
  assert.equal(await row.getAttribute('data-status'), 'finished');
  assert.equal(await page.locator('#waiting-tasks').count(), 0);
  assert.equal(await page.locator('#tasks-badge').count(), 0);
  await shot(page, 'tasks', { fullPage: true });
  await page.setViewportSize({ width: 390, height: 844 });
  await shot(page, 'tasks-phone', { fullPage: true });
  await page.setViewportSize({ width: 1280, height: 900 });
  assert.deepEqual(errors, []);
});
