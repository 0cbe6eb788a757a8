//! The soak's loopback site: a page that writes a canary into every kind
//! of browser state, a page that reports every kind it can find, and the
//! server-side counts the pages cannot see (cookies sent, HTTP cache
//! misses).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, header};
use axum::response::{Html, IntoResponse};
use axum::routing::get;
use serde::Deserialize;

/// Every canary starts with this; finding it in a fresh session is a leak.
pub const MARK: &str = "cnry";

/// What the server saw.
#[derive(Default)]
pub struct Seen {
    /// The canary handed out per pair.
    pub canaries: HashMap<u32, String>,
    /// Requests for `/res/{pair}.js` that reached the server.
    pub res_hits: HashMap<u32, u32>,
    /// Requests whose `Cookie` header carried a canary.
    pub cookie_requests: u64,
    /// Requests for the service worker's script.
    pub sw_hits: u64,
}

/// The site's shared state.
pub type Site = Arc<Mutex<Seen>>;

#[derive(Deserialize)]
struct Pair {
    p: u32,
}

/// Counts a request that carried a canary in its cookies.
fn note_cookies(site: &Site, headers: &HeaderMap) {
    let carries = headers
        .get_all(header::COOKIE)
        .iter()
        .any(|v| v.to_str().is_ok_and(|s| s.contains(MARK)));
    if carries {
        site.lock().unwrap().cookie_requests += 1;
    }
}

const DONE: &str = r#"
function within(promise, ms, what) {
  return Promise.race([promise, new Promise(ok => setTimeout(() => ok("timeout: " + what), ms))]);
}
function done(t) {
  const p = document.createElement("p");
  p.id = "done";
  p.textContent = t;
  document.body.appendChild(p);
}"#;

async fn write(State(site): State<Site>, Query(q): Query<Pair>, h: HeaderMap) -> impl IntoResponse {
    note_cookies(&site, &h);
    let canary = format!("{MARK}{}x{:08x}", q.p, rand::random::<u32>());
    site.lock().unwrap().canaries.insert(q.p, canary.clone());
    let page = format!(
        r#"<!doctype html><html><head><title>write</title></head><body>
<script src="/res/{p}.js"></script>
<script>
const c = "{canary}";
{DONE}
async function main() {{
  document.cookie = "js=" + c + "; max-age=86400; path=/";
  localStorage.setItem("canary", c);
  await new Promise((ok, no) => {{
    const r = indexedDB.open("soak", 1);
    r.onupgradeneeded = () => r.result.createObjectStore("kv");
    r.onerror = () => no(r.error);
    r.onsuccess = () => {{
      const tx = r.result.transaction("kv", "readwrite");
      tx.objectStore("kv").put(c, "canary");
      tx.oncomplete = () => {{ r.result.close(); ok(); }};
      tx.onerror = () => no(tx.error);
    }};
  }});
  const cache = await caches.open("soak");
  await cache.put("/cached-entry", new Response(c));
  // Bounded: in a Cordon session, register() sometimes never settles
  // (TESTING.md); the other channels are still checked then.
  const sw = await within((async () => {{
    await navigator.serviceWorker.register("/sw.js?c=" + c);
    await navigator.serviceWorker.ready;
    return "ok";
  }})(), 2000, "service worker");
  return sw === "ok" ? "written" : "written; service worker hung";
}}
main().then(done, e => done("error: " + e));
</script></body></html>"#,
        p = q.p
    );
    (
        [(
            header::SET_COOKIE,
            format!("srv={canary}; Max-Age=86400; Path=/"),
        )],
        Html(page),
    )
}

async fn read(State(site): State<Site>, Query(q): Query<Pair>, h: HeaderMap) -> Html<String> {
    note_cookies(&site, &h);
    Html(format!(
        r#"<!doctype html><html><head><title>read</title></head><body>
<pre id="report"></pre>
<script src="/res/{p}.js"></script>
<script>
{DONE}
async function idb() {{
  const out = [];
  for (const d of await indexedDB.databases()) {{
    out.push("db:" + d.name);
    const db = await new Promise((ok, no) => {{
      const r = indexedDB.open(d.name);
      r.onsuccess = () => ok(r.result);
      r.onerror = () => no(r.error);
    }});
    for (const name of db.objectStoreNames) {{
      const all = await new Promise((ok, no) => {{
        const r = db.transaction(name).objectStore(name).getAll();
        r.onsuccess = () => ok(r.result);
        r.onerror = () => no(r.error);
      }});
      out.push(name + "=" + JSON.stringify(all));
    }}
    db.close();
  }}
  return out;
}}
async function cacheStorage() {{
  const out = [];
  for (const k of await caches.keys()) {{
    const cache = await caches.open(k);
    for (const req of await cache.keys()) {{
      out.push(k + ":" + req.url + "=" + await (await cache.match(req)).text());
    }}
  }}
  return out;
}}
async function main() {{
  const r = {{}};
  r.cookie = document.cookie;
  r.local_storage = JSON.stringify(Object.assign({{}}, localStorage));
  r.indexed_db = await within(idb(), 5000, "indexed_db");
  r.cache_storage = await within(cacheStorage(), 5000, "cache_storage");
  const regs = await within(navigator.serviceWorker.getRegistrations(), 5000, "registrations");
  r.service_workers = Array.isArray(regs)
    ? regs.map(g => (g.active || g.waiting || g.installing || {{}}).scriptURL || "?")
    : regs;
  r.sw_controller = navigator.serviceWorker.controller ? navigator.serviceWorker.controller.scriptURL : "";
  r.sw_probe = await within(fetch("/sw-probe").then(res => res.text()), 5000, "sw_probe");
  r.http_cache = window.res || "";
  document.getElementById("report").textContent = JSON.stringify(r);
  return "read";
}}
main().then(done, e => done("error: " + e));
</script></body></html>"#,
        p = q.p
    ))
}

/// A script cacheable for a day; its body says which request it answered.
async fn res(
    State(site): State<Site>,
    Path(file): Path<String>,
    h: HeaderMap,
) -> impl IntoResponse {
    note_cookies(&site, &h);
    let pair: u32 = file.trim_end_matches(".js").parse().unwrap_or(u32::MAX);
    let n = {
        let mut seen = site.lock().unwrap();
        let n = seen.res_hits.entry(pair).or_default();
        *n += 1;
        *n
    };
    (
        [
            (header::CONTENT_TYPE, "text/javascript"),
            (header::CACHE_CONTROL, "public, max-age=86400"),
        ],
        format!("window.res = \"hit-{n}\";"),
    )
}

/// A service worker that answers `/sw-probe` with the canary in its URL.
async fn sw(State(site): State<Site>, h: HeaderMap) -> impl IntoResponse {
    note_cookies(&site, &h);
    site.lock().unwrap().sw_hits += 1;
    (
        [(header::CONTENT_TYPE, "text/javascript")],
        r#"const c = new URL(self.location).searchParams.get("c");
self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", e => e.waitUntil(self.clients.claim()));
self.addEventListener("fetch", e => {
  if (new URL(e.request.url).pathname === "/sw-probe") {
    e.respondWith(new Response("sw-" + c));
  }
});"#,
    )
}

async fn probe(State(site): State<Site>, h: HeaderMap) -> &'static str {
    note_cookies(&site, &h);
    "server"
}

/// Serves the site on 127.0.0.1; returns its address and state.
pub async fn start() -> (std::net::SocketAddr, Site) {
    let site = Site::default();
    let app = axum::Router::new()
        .route("/write", get(write))
        .route("/read", get(read))
        .route("/res/{file}", get(res))
        .route("/sw.js", get(sw))
        .route("/sw-probe", get(probe))
        .with_state(site.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, site)
}
