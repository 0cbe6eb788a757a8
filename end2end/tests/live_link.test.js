// Live links in a real browser: an agent's application (a page on another
// origin) frames a session's live link, its user sees the browser and
// drives it with the mouse as the agent; a page on an origin the tenant
// did not allow cannot frame the link, no page can frame the dashboard,
// and a revoked link's frame says so.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  agentApi, cordon, freshDataDir, launchBrowser, removeDir, startCordon, waitFor,
} from './helpers.js';
import { startSite } from './site.js';

let dataDir, server, key, site, browser;

before(async () => {
  site = await startSite();
  dataDir = freshDataDir();
  cordon(dataDir, ['tenant', 'create', 'acme', '--name', 'Acme Corp']);
  key = cordon(dataDir, ['apikey', 'create', '--tenant', 'acme', '--label', 'app']).trim();
  server = await startCordon(dataDir, {
    CORDON_EGRESS_ALLOW: `127.0.0.1:${site.port}`,
    CORDON_TENANT_LIVE_LINKS: JSON.stringify({
      acme: { frame_ancestors: [`http://127.0.0.1:${site.port}`], control: true },
    }),
  });
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await server?.stop();
  await site?.stop();
  if (dataDir) removeDir(dataDir);
});

const api = (method, path, body) => agentApi(server.url, key, method, path, body);

async function title(sid) {
  const { json } = await api('GET', `/api/sessions/${sid}/tabs`);
  return json[0]?.title;
}

/** The host page's frame once it has loaded something. */
async function frameOf(page) {
  return waitFor('the iframe', async () => page.frames().find((f) => f !== page.mainFrame() && f.url() !== 'about:blank'));
}

test('a framed control link shows the browser and the user drives it as the agent', async () => {
  const opened = await api('POST', '/api/sessions', {});
  assert.equal(opened.status, 201, JSON.stringify(opened.json));
  const sid = opened.json.session_id;
  const nav = await api('POST', `/api/sessions/${sid}/navigate`, { url: site.url('/pad') });
  assert.equal(nav.status, 200, JSON.stringify(nav.json));
  const made = await api('POST', `/api/sessions/${sid}/live_link`, { mode: 'control', ttl_s: 300 });
  assert.equal(made.status, 201, JSON.stringify(made.json));
  const link = made.json.url;

  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  await page.goto(site.url(`/host?src=${encodeURIComponent(link)}`));
  const frame = await frameOf(page);
  await frame.waitForSelector('[data-embed][data-state="live"]', { timeout: 30_000 });
  await waitFor('frames in the canvas', async () => Number(await frame.getAttribute('[data-embed]', 'data-frames')) > 0);
  assert.match(await frame.textContent('[data-note]'), /Click the picture/);

  // A click on the canvas lands on the page, as the agent.
  const box = await frame.locator('canvas').boundingBox();
  await page.mouse.click(box.x + box.width / 2, box.y + box.height / 2);
  await waitFor('the click to land', async () => (await title(sid)) === 'clicked 1').catch(async (e) => {
    const shown = await frame.textContent('[data-error]').catch(() => '');
    const { json } = await api('GET', `/api/sessions/${sid}/tabs`);
    throw new Error(`${e.message}; the frame showed ${JSON.stringify(shown)}; tabs ${JSON.stringify(json)}`);
  });

  // Revoked: the frame says so.
  const revoked = await api('DELETE', `/api/sessions/${sid}/live_link/${made.json.id}`);
  assert.equal(revoked.status, 204);
  await frame.waitForSelector('[data-embed][data-state="ended"]', { timeout: 30_000 });
  assert.match(await frame.getAttribute('[data-embed]', 'data-end-reason'), /revoked/);
  await context.close();
  await api('DELETE', `/api/sessions/${sid}`);
});

test('an origin the tenant did not allow cannot frame the link, and nobody frames the dashboard', async () => {
  const opened = await api('POST', '/api/sessions', {});
  const sid = opened.json.session_id;
  const made = await api('POST', `/api/sessions/${sid}/live_link`, { mode: 'view' });
  assert.equal(made.status, 201, JSON.stringify(made.json));
  const context = await browser.newContext();
  const page = await context.newPage();
  // Same site server, another origin (localhost, not 127.0.0.1).
  const foreign = `http://localhost:${site.port}`;
  for (const src of [made.json.url, `${server.url}/login`, `${server.url}/approvals`]) {
    await page.goto(`${foreign}/host?src=${encodeURIComponent(src)}`);
    const frame = await frameOf(page);
    // Chromium replaces a refused frame with its own error page.
    await waitFor(`${src} refused in the frame`, async () => frame.url().startsWith('chrome-error://'));
  }
  // Opened as a page of its own, the view link works.
  await page.goto(made.json.url);
  await page.waitForSelector('[data-embed][data-state="live"]', { timeout: 30_000 });
  assert.equal(await page.textContent('[data-note]'), 'View only');
  await context.close();
  await api('DELETE', `/api/sessions/${sid}`);
});
