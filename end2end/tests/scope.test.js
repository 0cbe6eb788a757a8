// Operators scoped to tenants, in a real browser: two tenants each with a
// running session and a click waiting for approval; operator "sam",
// scoped to acme with the CLI, sees only acme's on the Sessions and
// Approvals pages; the admin rescopes sam on the Operators page (its
// Tenants column, screenshotted at laptop and phone widths) and sam's next
// page load shows globex's instead.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  shot, agentApi, cordon, enroll, freshDataDir, launchBrowser, live, operatorPage, removeDir,
  serverFn, startCordon, waitFor,
} from './helpers.js';
import { startSite } from './site.js';

let dataDir, server, browser, admin, sam, site;
const keys = {};
const sessions = {};
const clicks = [];

before(async () => {
  site = await startSite();
  dataDir = freshDataDir();
  for (const t of ['acme', 'globex']) {
    cordon(dataDir, ['tenant', 'create', t]);
    keys[t] = cordon(dataDir, ['apikey', 'create', '--tenant', t, '--label', `${t} agent`]).trim();
  }
  server = await startCordon(dataDir, {
    CORDON_EGRESS_ALLOW: `127.0.0.1:${site.port}`,
    CORDON_APPROVAL_TIMEOUT_S: '300',
    CORDON_POOL_SIZE: '0',
  });
  browser = await launchBrowser();
  admin = await operatorPage(browser);
  await admin.page.setViewportSize({ width: 1280, height: 800 });
  await enroll(admin.page, server.enrollLink, server.url);
  // The CLI does not know the test server's port: point the link at it.
  const link = cordon(dataDir, ['operator', 'invite', 'sam', '--role', 'operator']).trim()
    .replace(/^http:\/\/[^/]+/, server.url);
  cordon(dataDir, ['operator', 'scope', 'sam', '--tenants', 'acme']);
  sam = await operatorPage(browser);
  await sam.page.setViewportSize({ width: 1280, height: 800 });
  await enroll(sam.page, link, server.url);
  // Each tenant's agent: a session on a page whose button waits for a person.
  for (const t of ['acme', 'globex']) {
    const api = (m, p, b) => agentApi(server.url, keys[t], m, p, b);
    const opened = await api('POST', '/api/sessions', {});
    assert.equal(opened.status, 201, JSON.stringify(opened.json));
    sessions[t] = opened.json.session_id;
    const nav = await api('POST', `/api/sessions/${sessions[t]}/navigate`, { url: site.url('/danger') });
    assert.equal(nav.status, 200, JSON.stringify(nav.json));
    clicks.push(api('POST', `/api/sessions/${sessions[t]}/click`, { selector: '#delete' }));
  }
});

after(async () => {
  // Deny what still waits, so the agents' clicks answer now.
  if (admin) {
    const list = await serverFn(admin.page, 'list_approvals', {}).catch(() => null);
    for (const a of list ? JSON.parse(list.body).pending || [] : []) {
      await serverFn(admin.page, 'decide_approval', { id: a.id, approve: 'false' }).catch(() => {});
    }
  }
  for (const t of Object.keys(sessions)) {
    await agentApi(server.url, keys[t], 'DELETE', `/api/sessions/${sessions[t]}`).catch(() => {});
  }
  await Promise.allSettled(clicks);
  await browser?.close();
  await server?.stop();
  await site?.stop();
  if (dataDir) removeDir(dataDir);
});

/** The `data-*` values of `selector`'s elements on `page`. */
async function attrs(page, selector, attr) {
  return page.locator(selector).evaluateAll((els, a) => els.map((e) => e.getAttribute(a)), attr);
}

/** The tenants of the approval cards on `page`. */
async function approvalTenants(page) {
  return page.locator('[data-approval]').evaluateAll((els) =>
    els.map((e) => (e.textContent.match(/· (acme|globex) ·/) || [])[1]));
}

test("a scoped operator's Sessions and Approvals pages show only their tenant", async () => {
  const { page, errors } = sam;
  await page.goto(server.url + '/sessions');
  await live(page);
  await page.waitForSelector(`[data-session="${sessions.acme}"]`);
  assert.deepEqual(await attrs(page, '#sessions [data-session]', 'data-session'), [sessions.acme]);
  assert.equal((await page.textContent('#my-tenants')).trim(), 'acme');
  await shot(page, 'sessions-scoped');

  // Each look loads the page afresh (see below).
  await waitFor('acme\'s approval card', async () => {
    await page.goto(server.url + '/approvals');
    await live(page);
    return (await page.locator('[data-approval]').count()) >= 1;
  }, 120_000);
  // The admin sees both waiting, so globex's has arrived too. Each look
  // loads the page afresh: an approval that opened between a page's render
  // and its change stream's start has no notice of its own (a known gap
  // of the live pages, see the notes).
  await waitFor('both approvals for the admin', async () => {
    await admin.page.goto(server.url + '/approvals');
    await live(admin.page);
    return (await approvalTenants(admin.page)).sort().join() === 'acme,globex';
  }, 120_000);
  await page.reload();
  await live(page);
  await page.waitForSelector('[data-approval]');
  assert.deepEqual(await approvalTenants(page), ['acme']);
  assert.equal((await page.textContent('#approvals-badge')).trim(), '1');
  assert.deepEqual(errors, []);
});

test('the admin rescopes an operator on the Operators page and the next page load follows', async () => {
  const { page, errors } = admin;
  const streams = [];
  const onRequest = (r) => { if (new URL(r.url()).pathname === '/ui/events') streams.push(r.url()); };
  page.on('request', onRequest);
  await page.goto(server.url + '/operators');
  await live(page);
  page.off('request', onRequest);
  // One change stream for the page, though its badges and both its lists
  // listen: a browser holds at most six HTTP/1.1 connections to a host.
  assert.equal(streams.length, 1, `change streams opened: ${streams.length}`);
  // So more tabs of the dashboard in one browser all load and go live
  // (with a stream per listener, four a page, the third waited forever).
  const tabs = [];
  for (let i = 0; i < 3; i++) {
    const tab = await admin.context.newPage();
    tabs.push(tab);
    await tab.goto(server.url + '/operators');
    await live(tab);
  }
  for (const tab of tabs) await tab.close();
  const row = page.locator('tr[data-operator="sam"]');
  await row.waitFor();
  assert.equal(await row.locator('input[name="tenants"]').inputValue(), 'acme');
  assert.match(await page.locator('tr[data-operator="admin"] td.scope').textContent(), /all \(admin\)/);
  assert.match(await page.textContent('#scope-hint'), /acme, globex/);
  await shot(page, 'operators-scope');
  await page.setViewportSize({ width: 390, height: 844 });
  await shot(page, 'operators-scope-phone', { fullPage: true });
  await page.setViewportSize({ width: 1280, height: 800 });

  await row.locator('input[name="tenants"]').fill('globex');
  await row.locator('.scope-form button[type="submit"]').click();
  // Saved: the store says so (the input reads "globex" as soon as it is
  // typed, so it proves nothing), then the page shows it.
  await waitFor('the saved scope', async () =>
    /\tsam\t.*\tglobex\n/.test(cordon(dataDir, ['operator', 'list'])));
  await waitFor('the page to show it', async () =>
    (await page.locator('tr[data-operator="sam"] input[name="tenants"]').inputValue()) === 'globex');

  await sam.page.goto(server.url + '/sessions');
  await live(sam.page);
  await sam.page.waitForSelector(`[data-session="${sessions.globex}"]`);
  assert.deepEqual(await attrs(sam.page, '#sessions [data-session]', 'data-session'), [sessions.globex]);
  // acme's session page is now "not found" for sam.
  await sam.page.goto(server.url + `/sessions/${sessions.acme}`);
  const error = sam.page.locator('[data-error]');
  await error.waitFor({ timeout: 30_000 });
  assert.equal(await error.getAttribute('data-error'), 'not_found');
  assert.deepEqual(errors, []);
});
