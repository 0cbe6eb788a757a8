// A loopback web site with a real login form, for the refresh tests: a CSRF
// token in the form (checked against its cookie, as Django does), a
// redirect after login, an httpOnly session cookie, and a value the
// logged-in page puts into localStorage. Fixed positions, so a test can
// click the fields in the streamed canvas.
import { createServer } from 'node:http';
import { createHmac, randomBytes } from 'node:crypto';

export const USER = 'alice';
export const PASSWORD = 'wonderland-e2e-only';

const style = 'body{margin:0;font:16px sans-serif} input,button{position:absolute;left:20px;width:300px;height:40px;font-size:18px}';

/**
 * RFC 6238 (HMAC-SHA-1, 30 s steps), written here from the RFC with
 * Node's own HMAC: the site's check, independent of Cordon's.
 */
export function totpCode(secret, atSeconds, digits = 6) {
  const counter = Buffer.alloc(8);
  counter.writeBigUInt64BE(BigInt(Math.floor(atSeconds / 30)));
  const h = createHmac('sha1', secret).update(counter).digest();
  const o = h[h.length - 1] & 0xf;
  const bin = ((h[o] & 0x7f) << 24) | (h[o + 1] << 16) | (h[o + 2] << 8) | h[o + 3];
  return String(bin % 10 ** digits).padStart(digits, '0');
}

export async function startSite() {
  const sessions = new Map(); // sessionid → user
  // With a TOTP secret set (`site.requireTotp(secret)`), a password login
  // asks for a code before /account; /stepup asks again on a logged-in
  // session. Every code submitted is kept with whether it was right.
  let totpSecret = null;
  const unverified = new Set(); // sessionids past the password only
  const codes = [];
  const server = createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    const cookies = Object.fromEntries((req.headers.cookie || '').split(/;\s*/).filter(Boolean).map((c) => {
      const i = c.indexOf('=');
      return [c.slice(0, i), c.slice(i + 1)];
    }));
    const user = sessions.get(cookies.sessionid);
    const html = (status, body, headers = {}) => {
      res.writeHead(status, { 'content-type': 'text/html; charset=utf-8', ...headers });
      res.end(body);
    };
    if (url.pathname === '/login' && req.method === 'GET') {
      const csrf = randomBytes(16).toString('hex');
      return html(200, `<!doctype html><title>Sign in</title><style>${style}</style>
<form method="post" action="/login">
<input type="hidden" name="csrf" value="${csrf}">
<input id="user" name="user" style="top:60px" placeholder="user" autocomplete="off">
<input id="pass" name="pass" type="password" style="top:120px" placeholder="password">
<button id="go" type="submit" style="top:180px">Sign in</button>
</form>`, { 'set-cookie': `csrftoken=${csrf}; Path=/; SameSite=Lax` });
    }
    if (url.pathname === '/login' && req.method === 'POST') {
      let body = '';
      req.on('data', (c) => { body += c; });
      req.on('end', () => {
        const f = new URLSearchParams(body);
        if (!f.get('csrf') || f.get('csrf') !== cookies.csrftoken) return html(403, '<title>CSRF failed</title>CSRF failed');
        if (f.get('user') !== USER || f.get('pass') !== PASSWORD) return html(401, '<title>Wrong password</title>wrong');
        const sid = randomBytes(16).toString('hex');
        sessions.set(sid, USER);
        if (totpSecret) unverified.add(sid);
        res.writeHead(302, {
          location: totpSecret ? '/stepup' : '/account',
          'set-cookie': `sessionid=${sid}; Path=/; HttpOnly; Max-Age=86400; SameSite=Lax`,
        });
        res.end();
      });
      return undefined;
    }
    if (url.pathname === '/stepup') {
      if (!user) return html(302, '', { location: '/login' });
      return html(200, `<!doctype html><title>Two-factor check</title><style>${style}</style>
<p style="position:absolute;left:20px;top:0">Enter the code from your authenticator app</p>
<form method="get" action="/verify">
<input id="code" name="code" style="top:60px" autocomplete="one-time-code" inputmode="numeric" autofocus>
<button id="go" type="submit" style="top:120px">Verify</button>
</form>`);
    }
    if (url.pathname === '/verify') {
      const code = url.searchParams.get('code') || '';
      const now = Date.now() / 1000;
      const ok = !!user && !!totpSecret && [now - 30, now, now + 30].some((t) => totpCode(totpSecret, t) === code);
      codes.push({ code, ok, user: user || null });
      if (!ok) return html(401, '<title>Wrong code</title>wrong code');
      unverified.delete(cookies.sessionid);
      return html(302, '', { location: '/account' });
    }
    if (url.pathname === '/account') {
      if (!user) return html(302, '', { location: '/login' });
      if (unverified.has(cookies.sessionid)) return html(302, '', { location: '/stepup' });
      return html(200, `<!doctype html><title>Account of ${user}</title><p>Logged in as ${user}</p>
<script>localStorage.setItem('api_token', 'token-of-${user}');</script>`);
    }
    if (url.pathname === '/whoami') {
      return html(200, `<!doctype html><title>whoami</title><p id="who">${user ? `user ${user}` : 'anonymous'}</p>
<p id="ls"></p><script>document.getElementById('ls').textContent = 'storage ' + (localStorage.getItem('api_token') || 'none');</script>`);
    }
    if (url.pathname === '/pad') {
      return html(200, `<!doctype html><title>ready</title><body style="margin:0">
<div id="pad" style="position:absolute;left:0;top:0;width:1280px;height:720px;background:#00f"
 onclick="window.n=(window.n||0)+1;this.style.background='#f00';document.title='clicked '+window.n"></div>`);
    }
    if (url.pathname === '/danger') {
      return html(200, `<!doctype html><title>Danger</title><body style="margin:0;font:16px sans-serif">
<button id="delete" style="position:absolute;left:40px;top:40px;width:220px;height:48px"
 onclick="window.d=(window.d||0)+1;document.title='deleted '+window.d">Delete account</button>`);
    }
    if (url.pathname === '/confirm') {
      return html(200, `<!doctype html><title>Archive</title><body style="margin:0;font:16px sans-serif">
<button id="archive" style="position:absolute;left:40px;top:40px;width:220px;height:48px"
 onclick="document.title = confirm('Archive the project acme/site? Its issues become read-only.') ? 'archived' : 'kept'">Archive project</button>`);
    }
    if (url.pathname === '/cdp-page') {
      return html(200, `<!doctype html><title>cdp page</title><body style="margin:0;font:16px sans-serif">
<input id="name" style="position:absolute;left:20px;top:20px;width:200px;height:30px">
<button id="save" style="position:absolute;left:20px;top:70px;width:120px;height:40px"
 onclick="document.title='saved '+document.getElementById('name').value">Save</button>
<a id="dl" href="/file.bin" style="position:absolute;left:20px;top:130px">download</a>
<p id="data" style="position:absolute;left:20px;top:160px"></p>
<p id="who" style="position:absolute;left:20px;top:200px">${user ? `user ${user}` : 'anonymous'}</p>
<script>fetch('/data').then((r) => r.text()).then((t) => { document.getElementById('data').textContent = t; });</script>`);
    }
    if (url.pathname === '/host') {
      // An agent's own application framing a page (a live link, or anything).
      const src = url.searchParams.get('src') || 'about:blank';
      const attr = src.replace(/&/g, '&amp;').replace(/"/g, '&quot;');
      return html(200, `<!doctype html><title>host app</title><body style="margin:0">
<iframe id="f" src="${attr}" style="border:0;width:100vw;height:100vh"></iframe>`);
    }
    if (url.pathname === '/data') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      return res.end('real data');
    }
    if (url.pathname === '/file.bin') {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-disposition': 'attachment; filename="file.bin"' });
      return res.end(Buffer.alloc(4096, 7));
    }
    return html(404, 'not found');
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address();
  return {
    port,
    codes,
    requireTotp: (secret) => { totpSecret = secret; },
    url: (path) => `http://127.0.0.1:${port}${path}`,
    stop: () => new Promise((r) => { server.closeAllConnections?.(); server.close(r); }),
  };
}
