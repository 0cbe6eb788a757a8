// The streamed browser, end to end in real Chromiums: an operator logs in
// to a site through the live view in the dashboard and saves the login; an
// agent's operator-mode session is then logged in (cookie and localStorage)
// while a clean one is not. And an operator takes control of an agent's
// session and hands it back.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  shot, agentApi, cordon, enroll, freshDataDir, launchBrowser, live, operatorPage, removeDir,
  serverFn, startCordon, waitFor,
} from './helpers.js';
import { PASSWORD, USER, startSite } from './site.js';

let dataDir, server, browser, admin, key, site;

before(async () => {
  site = await startSite();
  dataDir = freshDataDir();
  cordon(dataDir, ['tenant', 'create', 'acme', '--name', 'Acme Corp']);
  key = cordon(dataDir, ['apikey', 'create', '--tenant', 'acme', '--label', 'e2e agent']).trim();
  server = await startCordon(dataDir, { CORDON_EGRESS_ALLOW: `127.0.0.1:${site.port}` });
  browser = await launchBrowser();
  admin = await operatorPage(browser);
  await admin.page.setViewportSize({ width: 1280, height: 900 });
  await enroll(admin.page, server.enrollLink, server.url);
});

after(async () => {
  await browser?.close();
  await server?.stop();
  await site?.stop();
  if (dataDir) removeDir(dataDir);
});

/** The canvas point showing page point (x, y) of a `width`-wide page. */
async function at(page, x, y, width = 1280) {
  const box = await page.locator('[data-canvas]').boundingBox();
  const scale = box.width / width;
  return [box.x + x * scale, box.y + y * scale];
}

async function viewState(page) {
  return page.evaluate(() => {
    const v = document.querySelector('[data-live-view]');
    return v && { ...v.dataset };
  });
}

test('an operator logs in to a site through the streamed browser, saves it, and an agent is logged in with it', async () => {
  const { page, errors } = admin;
  await page.goto(server.url + '/credentials');
  await live(page);
  await page.click('.new-login summary');
  await page.fill('#start-refresh input[name="tenant"]', 'acme');
  await page.fill('#start-refresh input[name="domains"]', '127.0.0.1');
  await page.fill('#start-refresh input[name="start_url"]', site.url('/login'));
  await page.click('#start-refresh button[type="submit"]');
  await page.waitForURL(/\/sessions\/s_[a-z0-9]+\/live$/, { timeout: 60_000 });
  const sid = page.url().match(/\/sessions\/(s_[a-z0-9]+)\/live/)[1];
  await waitFor('the login page in the stream', async () => {
    const s = await viewState(page);
    return s?.state === 'live' && s.title === 'Sign in' && Number(s.frames) > 0 && s.control === 'yours' ? s : null;
  }, 60_000);
  assert.match(await page.textContent('#countdown'), /in 1[45] min/);
  await shot(page, 'refresh-login', { fullPage: true });

  // Type into the streamed canvas with the mouse and keyboard.
  await page.mouse.click(...(await at(page, 170, 80)));
  await waitFor('keyboard focus', async () => (await page.evaluate(() => document.activeElement?.hasAttribute('data-keys'))));
  assert.ok(await page.locator('.live.keyboard').count(), 'the stage shows the keyboard is captured');
  await page.keyboard.type(USER);
  await page.mouse.click(...(await at(page, 170, 140)));
  await page.keyboard.type(PASSWORD);
  await page.keyboard.press('Enter');
  await waitFor('the site to log in and redirect', async () => {
    const s = await viewState(page);
    return s?.title === `Account of ${USER}` ? s : null;
  }, 60_000);

  // Review: names and flags, never values.
  await page.click('#review-save');
  await page.waitForSelector('#save-preview table[data-preview="127.0.0.1"]', { timeout: 30_000 });
  const preview = await page.textContent('#save-preview');
  assert.match(preview, /sessionid/);
  assert.match(preview, /HttpOnly/);
  assert.match(preview, /api_token/);
  assert.doesNotMatch(preview, /token-of-alice/);
  await shot(page, 'refresh-preview', { fullPage: true });

  await page.click('#save-login');
  await page.waitForSelector('#save-diff', { timeout: 30_000 });
  const added = await page.textContent('#save-diff tr[data-domain="127.0.0.1"] .added');
  assert.match(added, /sessionid/);
  assert.match(added, /csrftoken/);
  await waitFor('the view to say the session ended', async () => {
    const s = await viewState(page);
    return s?.state === 'ended' ? s : null;
  });
  assert.match((await viewState(page)).endReason, /saved/);
  await shot(page, 'refresh-saved', { fullPage: true });
  const pageText = await page.textContent('body');
  assert.doesNotMatch(pageText, new RegExp(PASSWORD));

  // The vault has it; the session is gone.
  await page.goto(server.url + '/credentials');
  await live(page);
  const row = page.locator('#credentials tr[data-domain="127.0.0.1"]');
  await row.waitFor();
  assert.match(await row.textContent(), /refresh/);
  // A refresh session is never the agents': not even its end is shown.
  const info = await agentApi(server.url, key, 'GET', `/api/sessions/${sid}`);
  assert.equal(info.status, 404, JSON.stringify(info.json));

  // An agent with a grant lands logged in, localStorage too; a clean one does not.
  const asked = await agentApi(server.url, key, 'POST', '/api/grants/requests', { domains: ['127.0.0.1'], reason: 'e2e' });
  assert.equal(asked.status, 201, JSON.stringify(asked.json));
  const approved = await serverFn(page, 'approve_grant', { id: asked.json.request_id, expires_min: '30', multi_use: 'false' });
  assert.equal(approved.status, 200, approved.body);
  const polled = await waitFor('the token', async () => {
    const r = await agentApi(server.url, key, 'GET', `/api/grants/requests/${asked.json.request_id}`);
    return r.json.grant_token ? r.json : null;
  });
  const opened = await agentApi(server.url, key, 'POST', '/api/sessions',
    { credential_mode: 'operator', domains: ['127.0.0.1'], grant_token: polled.grant_token });
  assert.equal(opened.status, 201, JSON.stringify(opened.json));
  assert.ok(opened.json.injected['127.0.0.1'] >= 2, JSON.stringify(opened.json));
  const clean = await agentApi(server.url, key, 'POST', '/api/sessions', {});
  assert.equal(clean.status, 201, JSON.stringify(clean.json));
  const whoami = async (id) => {
    const nav = await agentApi(server.url, key, 'POST', `/api/sessions/${id}/navigate`, { url: site.url('/whoami') });
    assert.equal(nav.status, 200, JSON.stringify(nav.json));
    const dom = await agentApi(server.url, key, 'POST', `/api/sessions/${id}/read_dom`, {});
    return String(dom.json.html);
  };
  const logged = await whoami(opened.json.session_id);
  assert.match(logged, /user alice/);
  assert.match(logged, /storage token-of-alice/);
  const anon = await whoami(clean.json.session_id);
  assert.match(anon, /anonymous/);
  assert.match(anon, /storage none/);
  for (const id of [opened.json.session_id, clean.json.session_id]) {
    await agentApi(server.url, key, 'DELETE', `/api/sessions/${id}`);
  }
  assert.deepEqual(errors, []);
});

test('an operator takes control of an agent session, the agent is refused, and gets it back', async () => {
  const { page, errors } = admin;
  const opened = await agentApi(server.url, key, 'POST', '/api/sessions', {});
  assert.equal(opened.status, 201, JSON.stringify(opened.json));
  const sid = opened.json.session_id;
  const nav = await agentApi(server.url, key, 'POST', `/api/sessions/${sid}/navigate`, { url: site.url('/pad') });
  assert.equal(nav.status, 200, JSON.stringify(nav.json));

  await page.goto(`${server.url}/sessions/${sid}`);
  await live(page);
  await page.click('#watch');
  await page.waitForURL(`${server.url}/sessions/${sid}/live`);
  await waitFor('the agent page in the stream', async () => {
    const s = await viewState(page);
    return s?.state === 'live' && s.title === 'ready' && Number(s.frames) > 0 ? s : null;
  }, 60_000);
  assert.equal((await viewState(page)).control, 'none');

  await page.click('[data-take]');
  await waitFor('control', async () => (await viewState(page))?.control === 'yours');
  const refused = await agentApi(server.url, key, 'POST', `/api/sessions/${sid}/click`, { x: 10, y: 10 });
  assert.equal(refused.status, 409, JSON.stringify(refused.json));
  assert.equal(refused.json.error.code, 'operator_has_control');
  assert.match(refused.json.error.message, /admin/);
  await shot(page, 'live-control', { fullPage: true });

  // The operator's click reaches the page.
  await page.mouse.click(...(await at(page, 640, 360)));
  await waitFor('the click', async () => (await viewState(page))?.title === 'clicked 1');

  // The session's page says who has control while they do.
  const detail = await serverFn(page, 'get_session', { id: sid });
  assert.equal(JSON.parse(detail.body).control, 'admin', detail.body);

  await page.click('[data-release]');
  await waitFor('the hand back', async () => (await viewState(page))?.control === 'none');
  const ok = await agentApi(server.url, key, 'POST', `/api/sessions/${sid}/click`, { x: 10, y: 10 });
  assert.equal(ok.status, 200, JSON.stringify(ok.json));
  await waitFor('the agent click', async () => (await viewState(page))?.title === 'clicked 2');

  await agentApi(server.url, key, 'DELETE', `/api/sessions/${sid}`);
  await waitFor('the end', async () => (await viewState(page))?.state === 'ended');
  assert.deepEqual(errors, []);
});

test('a page\'s dialog shows in the live view, where the operator answers it', async () => {
  const { page, errors } = admin;
  const opened = await agentApi(server.url, key, 'POST', '/api/sessions', {});
  assert.equal(opened.status, 201, JSON.stringify(opened.json));
  const sid = opened.json.session_id;
  const nav = await agentApi(server.url, key, 'POST', `/api/sessions/${sid}/navigate`, { url: site.url('/confirm') });
  assert.equal(nav.status, 200, JSON.stringify(nav.json));
  // The agent's click opens a confirm(): the call answers with it.
  const click = await agentApi(server.url, key, 'POST', `/api/sessions/${sid}/click`, { selector: '#archive' });
  assert.equal(click.status, 200, JSON.stringify(click.json));
  assert.equal(click.json.dialog_opened.type, 'confirm', JSON.stringify(click.json));

  await page.goto(`${server.url}/sessions/${sid}/live`);
  await live(page);
  const box = page.locator('[data-dialog]');
  await box.waitFor({ state: 'visible', timeout: 60_000 });
  assert.match(await box.locator('[data-dialog-message]').textContent(), /^Archive the project acme\/site\?/);
  // Only whoever drives answers it.
  assert.equal(await box.locator('[data-dialog-answer="ok"]').isDisabled(), true);
  await page.click('[data-take]');
  await waitFor('control', async () => (await viewState(page))?.control === 'yours');
  assert.equal(await box.locator('[data-dialog-answer="ok"]').isDisabled(), false);
  await shot(page, 'live-dialog', { fullPage: true });
  await page.setViewportSize({ width: 390, height: 844 });
  await shot(page, 'live-dialog-phone', { fullPage: true });
  await page.setViewportSize({ width: 1280, height: 900 });
  await box.locator('[data-dialog-answer="ok"]').click();
  await waitFor('the answer', async () => {
    const s = await viewState(page);
    return s?.title === 'archived' && s.dialogOpen === '' ? s : null;
  });
  assert.equal(await box.isVisible(), false);
  await agentApi(server.url, key, 'DELETE', `/api/sessions/${sid}`);
  assert.deepEqual(errors, []);
});
