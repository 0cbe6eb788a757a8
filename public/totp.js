// The Credentials page's "Add a seed" form: posts the set-up link, the
// secret or a QR code image (chosen, or pasted as a screenshot) to
// /ui/credentials/totp as JSON. The image is read on the server and never
// kept; nothing entered here is echoed back.
const MAX_IMAGE = 5 * 1024 * 1024;
const pasted = new WeakMap();

const status = (form, text, bad) => {
  const s = form.querySelector('[data-totp-status]');
  if (s) {
    s.textContent = text;
    s.dataset.state = bad ? 'error' : 'ok';
  }
};

const dataUrl = (blob) => new Promise((resolve, reject) => {
  const r = new FileReader();
  r.onload = () => resolve(String(r.result));
  r.onerror = () => reject(new Error('the image could not be read'));
  r.readAsDataURL(blob);
});

document.addEventListener('paste', (event) => {
  const form = event.target.closest && event.target.closest('form[data-totp-add]');
  if (!form) return;
  const file = Array.from(event.clipboardData ? event.clipboardData.files : []).find((f) => f.type.startsWith('image/'));
  if (!file) return;
  event.preventDefault();
  pasted.set(form, file);
  const note = form.querySelector('[data-totp-pasted]');
  if (note) {
    note.hidden = false;
    note.textContent = `A pasted image (${Math.ceil(file.size / 1024)} KB) will be read for its QR code.`;
  }
});

document.addEventListener('submit', async (event) => {
  const form = event.target.closest('form[data-totp-add]');
  if (!form) return;
  event.preventDefault();
  const el = form.elements;
  for (const f of form.querySelectorAll('[aria-invalid]')) f.removeAttribute('aria-invalid');
  const body = {
    tenant: el.tenant.value.trim(),
    domain: el.domain.value.trim(),
    label: el.label.value,
  };
  const image = (el.image.files && el.image.files[0]) || pasted.get(form);
  if (el.uri.value.trim()) body.uri = el.uri.value.trim();
  if (el.secret.value.trim()) {
    body.secret = el.secret.value;
    body.algorithm = el.algorithm.value;
    body.digits = el.digits.value;
    body.period = el.period.value;
  }
  const button = form.querySelector('button[type=submit]');
  button.disabled = true;
  try {
    if (image) {
      if (image.size > MAX_IMAGE) {
        throw Object.assign(new Error(`image: is ${(image.size / 1048576).toFixed(1)} MiB; at most 5 MiB`), { field: 'image' });
      }
      status(form, 'Reading the QR code…');
      body.image_base64 = await dataUrl(image);
    } else {
      status(form, 'Storing…');
    }
    const res = await fetch('/ui/credentials/totp', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      credentials: 'same-origin',
      body: JSON.stringify(body),
    });
    const answer = await res.json().catch(() => ({}));
    if (!res.ok) {
      const e = answer.error || {};
      throw Object.assign(new Error(e.message || `the server answered ${res.status}`), { field: e.field });
    }
    form.reset();
    pasted.delete(form);
    const note = form.querySelector('[data-totp-pasted]');
    if (note) note.hidden = true;
    status(form, `Stored “${answer.label}” for ${answer.domain} (${answer.algorithm}, ${answer.digits} digits, ${answer.period} s).`);
    document.dispatchEvent(new CustomEvent('cordon:totp-changed'));
  } catch (e) {
    const field = e.field && e.field !== 'body' ? el[e.field === 'image' ? 'image' : e.field] : null;
    if (field && field.setAttribute) field.setAttribute('aria-invalid', 'true');
    status(form, e.message, true);
  } finally {
    button.disabled = false;
  }
});
