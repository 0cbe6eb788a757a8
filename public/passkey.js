// Cordon's passkey ceremonies in the browser: the one piece of the
// dashboard that must be JavaScript (navigator.credentials speaks
// ArrayBuffers; the server speaks base64url JSON). Forms marked
// data-passkey="login" | "enroll" | "add" are handled here, whether or not
// the page has hydrated yet. Nothing secret is logged or stored here.
const b64u = {
  decode(s) {
    const pad = s.length % 4 === 0 ? '' : '='.repeat(4 - (s.length % 4));
    const bin = atob(s.replace(/-/g, '+').replace(/_/g, '/') + pad);
    return Uint8Array.from(bin, (c) => c.charCodeAt(0)).buffer;
  },
  encode(buf) {
    let bin = '';
    for (const b of new Uint8Array(buf)) bin += String.fromCharCode(b);
    return btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  },
};

async function post(url, body) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    credentials: 'same-origin',
    body: JSON.stringify(body),
  });
  const json = await res.json().catch(() => ({}));
  if (!res.ok) {
    const msg = json.error?.message || `the server answered ${res.status}`;
    throw new Error(msg);
  }
  return json;
}

function creationOptions(json) {
  const pk = json.publicKey;
  pk.challenge = b64u.decode(pk.challenge);
  pk.user.id = b64u.decode(pk.user.id);
  pk.excludeCredentials = (pk.excludeCredentials || []).map((c) => ({ ...c, id: b64u.decode(c.id) }));
  return { publicKey: pk };
}

function requestOptions(json) {
  const pk = json.publicKey;
  pk.challenge = b64u.decode(pk.challenge);
  pk.allowCredentials = (pk.allowCredentials || []).map((c) => ({ ...c, id: b64u.decode(c.id) }));
  return { publicKey: pk };
}

function registration(cred) {
  return {
    id: cred.id,
    rawId: b64u.encode(cred.rawId),
    type: cred.type,
    response: {
      attestationObject: b64u.encode(cred.response.attestationObject),
      clientDataJSON: b64u.encode(cred.response.clientDataJSON),
      transports: cred.response.getTransports ? cred.response.getTransports() : [],
    },
    extensions: cred.getClientExtensionResults ? cred.getClientExtensionResults() : {},
  };
}

function assertion(cred) {
  const r = cred.response;
  return {
    id: cred.id,
    rawId: b64u.encode(cred.rawId),
    type: cred.type,
    response: {
      authenticatorData: b64u.encode(r.authenticatorData),
      clientDataJSON: b64u.encode(r.clientDataJSON),
      signature: b64u.encode(r.signature),
      userHandle: r.userHandle ? b64u.encode(r.userHandle) : null,
    },
    extensions: cred.getClientExtensionResults ? cred.getClientExtensionResults() : {},
  };
}

// Where to go after logging in: `next` only when it is a path of this
// dashboard. A browser reads `/\evil.example`, `/\/evil.example` and
// `/<tab>/evil.example` as `//evil.example` (another site), so the raw
// value must start with one `/` followed by neither `/` nor `\`, and hold
// no backslash or control character; what is kept is the parsed URL's
// path, query and fragment, checked to be on this origin.
function safeNext(next, origin) {
  if (typeof next !== 'string' || !/^\/(?![\/\\])/.test(next)) return '/';
  if (/[\\\u0000-\u001f\u007f]/.test(next)) return '/';
  let url;
  try {
    url = new URL(next, origin);
  } catch {
    return '/';
  }
  if (url.origin !== origin) return '/';
  return url.pathname + url.search + url.hash;
}

function nextPage() {
  return safeNext(new URLSearchParams(location.search).get('next'), location.origin);
}

const flows = {
  async login(form) {
    const name = form.elements.name.value;
    const options = await post('/ui/auth/login/start', { name });
    const cred = await navigator.credentials.get(requestOptions(options));
    await post('/ui/auth/login/finish', assertion(cred));
    location.assign(nextPage());
  },
  async enroll(form) {
    const token = location.hash.slice(1);
    const passkey_name = form.elements.passkey_name.value;
    const options = await post('/ui/auth/enroll/start', { token, passkey_name });
    const cred = await navigator.credentials.create(creationOptions(options));
    await post('/ui/auth/enroll/finish', registration(cred));
    // The secret must not stay in the address bar or the history.
    history.replaceState(null, '', '/enroll');
    location.assign('/');
  },
  async export(form) {
    // A fresh passkey check, then the download (the check allows one).
    await reauth();
    const q = new URLSearchParams({ tenant: form.elements.tenant.value, domain: form.elements.domain.value });
    location.assign(`/ui/credentials/export?${q}`);
  },
  async 'export-totp'(form) {
    // The same rule as cookies: a fresh passkey check, then the download.
    await reauth();
    const q = new URLSearchParams({ tenant: form.elements.tenant.value, id: form.elements.id.value });
    location.assign(`/ui/credentials/totp/export?${q}`);
  },
  async add(form) {
    // A check with a passkey you have, then the new one (the check allows
    // one change: a stolen dashboard session cannot add its own).
    const passkey_name = form.elements.passkey_name.value;
    await reauth();
    const options = await post('/ui/auth/passkeys/start', { passkey_name });
    const cred = await navigator.credentials.create(creationOptions(options));
    await post('/ui/auth/passkeys/finish', registration(cred));
    form.reset();
    document.dispatchEvent(new CustomEvent('cordon:passkeys-changed'));
  },
  async remove(form) {
    // The same rule: a fresh passkey check, then the removal.
    await reauth();
    const res = await fetch('/ui/fn/remove_passkey', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      credentials: 'same-origin',
      body: new URLSearchParams({ id: form.elements.id.value }),
    });
    if (!res.ok) {
      const json = await res.json().catch(() => ({}));
      throw new Error(json.message || `the server answered ${res.status}`);
    }
    document.dispatchEvent(new CustomEvent('cordon:passkeys-changed'));
  },
};

// Proves presence again with one of the operator's passkeys: the server
// then allows one sensitive step within five minutes.
async function reauth() {
  const options = await post('/ui/auth/reauth/start', {});
  const cred = await navigator.credentials.get(requestOptions(options));
  await post('/ui/auth/reauth/finish', assertion(cred));
}

document.addEventListener('submit', async (event) => {
  const form = event.target.closest('form[data-passkey]');
  if (!form) return;
  event.preventDefault();
  const status = form.querySelector('[data-passkey-status]');
  const button = form.querySelector('button[type="submit"]');
  const say = (text, kind) => {
    if (!status) return;
    status.textContent = text;
    status.dataset.kind = kind;
  };
  if (!window.PublicKeyCredential) {
    say('This browser cannot use passkeys here (passkeys need https or localhost).', 'error');
    return;
  }
  if (button) button.disabled = true;
  say('Waiting for your passkey…', 'busy');
  try {
    await flows[form.dataset.passkey](form);
    // A removed passkey's row goes (the page may reuse it for the next).
    say(form.dataset.passkey === 'remove' ? '' : 'Done.', 'ok');
  } catch (err) {
    const text = err.name === 'NotAllowedError'
      ? 'The passkey prompt was cancelled or timed out. Try again.'
      : err.message;
    say(text, 'error');
  } finally {
    if (button) button.disabled = false;
  }
});
