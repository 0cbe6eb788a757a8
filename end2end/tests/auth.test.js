// Operator login and roles, refused the right way: enrollment links, passkey
// login and logout, every page, server function and stream while logged
// out, as a viewer, and with a forged Origin.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  agentApi, cordon, enroll, freshDataDir, launchBrowser, login, operatorPage, removeDir,
  serverFn, startCordon, waitFor,
} from './helpers.js';

let dataDir, server, browser, admin;

const PAGES = ['/', '/sessions', '/sessions/s_aaaaaaaaaaaaaaaaaaaaaaaaaa', '/grants', '/credentials',
  '/audit', '/tenants', '/operators', '/account'];
// Every server function with arguments of the right shape.
const FNS = {
  whoami: {}, get_status: {}, my_passkeys: {}, remove_passkey: { id: 'pk_x' },
  list_operators: {}, invite_operator: { name: 'mallory', role: 'admin' },
  set_operator_enabled: { id: 'op_x', enabled: 'false' },
  set_operator_tenants: { id: 'op_x', tenants: 'acme' },
  list_grants: {}, approve_grant: { id: 'gr_x', expires_min: '60', multi_use: 'false' },
  deny_grant: { id: 'gr_x' }, revoke_grant: { jti: 'gt_x' },
  list_sessions: {}, get_session: { id: 's_x' },
  end_session: { id: 's_x' }, list_credentials: {}, delete_credential: { tenant: 'acme', domain: 'a.test' },
  list_tenants: {}, create_tenant: { id: 'evil', name: 'Evil' },
  create_api_key: { tenant: 'acme', label: 'x' }, revoke_api_key: { id: 'k_x' },
  query_audit: { 'query[cursor]': 'newest', 'query[limit]': '10' }, verify_audit: {},
};
const ADMIN_ONLY = ['list_operators', 'invite_operator', 'set_operator_enabled', 'set_operator_tenants', 'list_tenants',
  'create_tenant', 'create_api_key', 'revoke_api_key'];
const OPERATOR_ONLY = ['approve_grant', 'deny_grant', 'revoke_grant', 'end_session', 'delete_credential'];

function post(path, body, headers = {}) {
  return fetch(server.url + path, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: server.url, ...headers },
    body: new URLSearchParams(body).toString(),
    redirect: 'manual',
  });
}

before(async () => {
  dataDir = freshDataDir();
  cordon(dataDir, ['tenant', 'create', 'acme']);
  server = await startCordon(dataDir);
  browser = await launchBrowser();
  admin = await operatorPage(browser);
  await enroll(admin.page, server.enrollLink, server.url);
});

after(async () => {
  await browser?.close();
  await server?.stop();
  if (dataDir) removeDir(dataDir);
});

test('an enrollment link works once; a used or tampered one is refused with a clear message', async () => {
  const { page } = await operatorPage(browser);
  await page.goto(server.enrollLink);
  await page.click('#enroll-submit');
  await waitFor('the refusal', async () => /used already/.test(await page.textContent('[data-passkey-status]')));
  await page.goto(server.enrollLink.replace(/#cen_.{4}/, '#cen_AAAA'));
  await page.click('#enroll-submit');
  await waitFor('the refusal', async () => /not valid/.test(await page.textContent('[data-passkey-status]')));
  assert.equal(new URL(page.url()).pathname, '/enroll');
  await page.context().close();
});

test('logging out ends the session; logging in again takes the passkey', async () => {
  const { page } = admin;
  await page.click('#logout');
  await page.waitForURL(/\/login$/);
  await page.goto(server.url + '/grants');
  await page.waitForURL(/\/login\?next=%2Fgrants$/);
  await login(page, server.url, 'admin');
  assert.match(await page.textContent('#whoami'), /admin/);
});

test('after a passkey login, next leads only to a path of this dashboard, never another site', async () => {
  const { page, context } = admin;
  // Nothing may leave the machine: requests to any other host are
  // recorded and cut.
  const offsite = [];
  const guard = (route) => {
    const url = new URL(route.request().url());
    if (url.hostname === 'localhost' || url.hostname === '127.0.0.1') return route.continue();
    offsite.push(url.href);
    return route.abort();
  };
  await context.route('**/*', guard);
  const cases = [
    // Another site, however spelled (browsers read the first three as
    // `//evil.example`), and a backslash anywhere.
    ['/\\evil.example/', '/'],
    ['/\\/evil.example', '/'],
    ['/\t/evil.example', '/'],
    ['//evil.example', '/'],
    ['https://evil.example/', '/'],
    ['/x\\y', '/'],
    // An honest page, with its query and fragment.
    ['/tasks?x=1#y', '/tasks?x=1#y'],
  ];
  try {
    for (const [next, want] of cases) {
      await page.goto(`${server.url}/login?next=${encodeURIComponent(next)}`);
      await page.fill('#login-name', 'admin');
      await page.click('#login-submit');
      const wanted = `${server.url}${want}`;
      await page.waitForURL((url) => url.href === wanted, { timeout: 30_000 }).catch((e) => {
        throw new Error(`next=${JSON.stringify(next)}: wanted ${want}, at ${page.url()}: ${e.message}`);
      });
    }
    assert.deepEqual(offsite, [], 'no request left for another host');
  } finally {
    await context.unroute('**/*', guard);
  }
});

test('logged out, every page sends to login and every server function and stream answers 401', async () => {
  for (const path of PAGES) {
    const res = await fetch(server.url + path, { redirect: 'manual' });
    assert.equal(res.status, 303, path);
    assert.match(res.headers.get('location'), /^\/login/, path);
  }
  for (const [name, body] of Object.entries(FNS)) {
    const res = await post(`/ui/fn/${name}`, body);
    const text = await res.text();
    assert.equal(res.status, 401, `${name}: ${text}`);
    assert.equal(JSON.parse(text).kind, 'unauthorized', name);
  }
  const events = await fetch(server.url + '/ui/events');
  assert.equal(events.status, 401);
  // Nothing was created by those attempts.
  assert.doesNotMatch(cordon(dataDir, ['tenant', 'list']), /evil/);
  assert.doesNotMatch(cordon(dataDir, ['operator', 'list']), /mallory/);
});

test('a forged Origin is refused before anything runs, even with a valid session cookie', async () => {
  const { page } = admin;
  const cookies = await page.context().cookies();
  const cookie = cookies.find((c) => c.name === 'cordon_session');
  assert.ok(cookie, 'no session cookie');
  assert.equal(cookie.httpOnly, true);
  assert.equal(cookie.sameSite, 'Strict');
  for (const name of ['create_tenant', 'invite_operator', 'approve_grant']) {
    const res = await post(`/ui/fn/${name}`, FNS[name], {
      origin: 'http://evil.test', cookie: `cordon_session=${cookie.value}`,
    });
    assert.equal(res.status, 403, name);
  }
  const noOrigin = await fetch(server.url + '/ui/fn/create_tenant', {
    method: 'POST', headers: { cookie: `cordon_session=${cookie.value}`, 'content-type': 'application/x-www-form-urlencoded' },
    body: 'id=evil&name=Evil',
  });
  assert.equal(noOrigin.status, 403);
  assert.doesNotMatch(cordon(dataDir, ['tenant', 'list']), /evil/);
});

test('a viewer reads but cannot approve, end, delete or administer, and each refusal is audited', async () => {
  const link = invite('vera', 'viewer');
  const viewer = await operatorPage(browser);
  await enroll(viewer.page, link, server.url);
  const key = cordon(dataDir, ['apikey', 'create', '--tenant', 'acme']).trim();
  const req = await agentApi(server.url, key, 'POST', '/api/grants/requests', { domains: ['v.test'], reason: 'viewer test' });
  await viewer.page.goto(server.url + '/grants');
  await viewer.page.waitForSelector(`#pending [data-request="${req.json.request_id}"]`);
  assert.equal(await viewer.page.locator('button.approve').first().isDisabled(), true);
  // Admin pages are not in the viewer's navigation.
  assert.equal(await viewer.page.locator('nav >> text=Operators').count(), 0);
  for (const name of [...ADMIN_ONLY, ...OPERATOR_ONLY]) {
    const body = name === 'approve_grant' ? { ...FNS[name], id: req.json.request_id } : FNS[name];
    const res = await serverFnAs(viewer.page, name, body);
    assert.equal(res.status, 403, `${name}: ${res.body}`);
    assert.equal(JSON.parse(res.body).kind, 'forbidden', name);
  }
  for (const name of ['list_grants', 'list_sessions', 'query_audit', 'get_status']) {
    const res = await serverFnAs(viewer.page, name, FNS[name]);
    assert.equal(res.status, 200, `${name}: ${res.body}`);
  }
  const state = await agentApi(server.url, key, 'GET', `/api/grants/requests/${req.json.request_id}`);
  assert.equal(state.json.state, 'pending');
  await admin.page.goto(server.url + '/audit?action=operator.refused');
  await admin.page.waitForSelector('#audit-events');
  assert.match(await admin.page.textContent('#audit-events'), /operator\.refused/);
  await viewer.context.close();
});

test('disabling an operator ends their dashboard session at once', async () => {
  const link = invite('otto', 'operator');
  const otto = await operatorPage(browser);
  await enroll(otto.page, link, server.url);
  assert.equal((await serverFnAs(otto.page, 'whoami', {})).status, 200);
  cordon(dataDir, ['operator', 'disable', 'otto']);
  assert.equal((await serverFnAs(otto.page, 'whoami', {})).status, 401);
  await otto.page.goto(server.url + '/');
  await otto.page.waitForURL(/\/login/);
  await otto.context.close();
});

test('a replayed login answer is refused', async () => {
  const { page } = admin;
  let finish, cookieDuringCeremony;
  await page.route('**/ui/auth/login/finish', async (route) => {
    finish = route.request().postData();
    cookieDuringCeremony = (await route.request().allHeaders()).cookie;
    await route.continue();
  });
  await page.click('#logout');
  await page.waitForURL(/\/login$/);
  await login(page, server.url, 'admin');
  await page.unroute('**/ui/auth/login/finish');
  assert.ok(finish, 'no login answer captured');
  // The session id changed at login: the pre-login id is worth nothing.
  const before = /cordon_session=([^;]+)/.exec(cookieDuringCeremony || '')?.[1];
  const after = (await page.context().cookies()).find((c) => c.name === 'cordon_session')?.value;
  assert.ok(before && after, 'session cookies not seen');
  assert.notEqual(before, after, 'the session id was not rotated at login');
  const old = await fetch(server.url + '/ui/fn/whoami', {
    method: 'POST', headers: { origin: server.url, cookie: `cordon_session=${before}` },
  });
  assert.equal(old.status, 401);
  // Same answer again, with no ceremony in progress: refused.
  const replay = await page.evaluate(async (body) => {
    const r = await fetch('/ui/auth/login/finish', { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    return { status: r.status, body: await r.text() };
  }, finish);
  assert.equal(replay.status, 409, replay.body);
  assert.match(replay.body, /no passkey ceremony/);
  // A forged answer to a fresh ceremony does not verify.
  const forged = await page.evaluate(async (body) => {
    await fetch('/ui/auth/login/start', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'admin' }) });
    const tampered = JSON.parse(body);
    tampered.response.signature = tampered.response.signature.replace(/^.{8}/, 'AAAAAAAA');
    const r = await fetch('/ui/auth/login/finish', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(tampered) });
    return { status: r.status, body: await r.text() };
  }, finish);
  assert.equal(forged.status, 400, forged.body);
  assert.match(forged.body, /did not verify/);
  // An answer made for another origin (a phishing page's) does not verify.
  const foreign = await page.evaluate(async (body) => {
    await fetch('/ui/auth/login/start', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'admin' }) });
    const b64u = (s) => atob(s.replace(/-/g, '+').replace(/_/g, '/') + '='.repeat((4 - (s.length % 4)) % 4));
    const enc = (s) => btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
    const answer = JSON.parse(body);
    const client = JSON.parse(b64u(answer.response.clientDataJSON));
    client.origin = 'https://cordon.evil.test';
    answer.response.clientDataJSON = enc(JSON.stringify(client));
    const r = await fetch('/ui/auth/login/finish', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(answer) });
    return { status: r.status, body: await r.text() };
  }, finish);
  assert.equal(foreign.status, 400, foreign.body);
  assert.match(foreign.body, /did not verify/);
  // A name that is no operator answers as a real operator's start: the
  // same fields, relying party, timeout and policy (nobody learns which
  // names exist).
  const shapes = await page.evaluate(async () => {
    const start = async (name) => {
      const r = await fetch('/ui/auth/login/start', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name }) });
      return { status: r.status, pk: (await r.json()).publicKey };
    };
    const shape = ({ status, pk }) => ({
      status, keys: Object.keys(pk).sort(), cred: Object.keys(pk.allowCredentials[0]).sort(),
      rp: pk.rpId, timeout: pk.timeout, uv: pk.userVerification, challenge: pk.challenge.length,
    });
    return { real: shape(await start('admin')), none: shape(await start('nobody-at-all')) };
  });
  assert.deepEqual(shapes.none, shapes.real);
});

// The CLI does not know the port the test server picked (its links use
// public_url, here unset): point the link at the test server.
function invite(name, role) {
  const link = cordon(dataDir, ['operator', 'invite', name, '--role', role]).trim();
  assert.match(link, /^http:\/\/localhost:8080\/enroll#cen_/);
  return link.replace(/^http:\/\/[^/]+/, server.url);
}

async function serverFnAs(page, name, fields) {
  return serverFn(page, name, fields);
}
