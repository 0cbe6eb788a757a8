"""Drives Cordon with a client generated from its own /api/openapi.json by
openapi-python-client (end2end/tests/contract.test.js generates it and runs
this): open a session, navigate to a loopback page, snapshot, click by ref,
read typed errors (element_not_found, then gone after close), request a
grant and poll it, close. Every answer is parsed by the generated models,
so an answer the document does not describe fails here.

Usage: generated_client_check.py CLIENT_DIR BASE_URL PAGE_URL (the key in
CORDON_KEY). Prints one JSON line of what it saw.
"""

import json
import os
import sys

sys.path.insert(0, sys.argv[1])
base, page = sys.argv[2], sys.argv[3]

from cordon_client import AuthenticatedClient  # noqa: E402
from cordon_client.api.default import (  # noqa: E402
    delete_sessions_id,
    get_grants_requests_id,
    post_grants_requests,
    post_sessions,
    post_sessions_id_click,
    post_sessions_id_navigate,
    post_sessions_id_snapshot,
)
from cordon_client.models import (  # noqa: E402
    ElementReqType1,
    ElementReqType2,
    GrantStatus,
    Navigated,
    NavigateReq,
    NewGrantRequest,
    OpenRequestType0,
    PostSessionsIdClickResponse422,
    PostSessionsIdNavigateResponse410,
    SessionInfo,
    SnapshotReq,
    SnapshotResult,
)


def expect(value, kind, what):
    if not isinstance(value, kind):
        raise SystemExit(f"{what}: expected {kind.__name__}, got {value!r}")
    return value


def refs(nodes):
    for n in nodes:
        yield n
        # Optional in the answer: a leaf has none.
        yield from refs(n.children if isinstance(n.children, list) else [])


client = AuthenticatedClient(base_url=base, token=os.environ["CORDON_KEY"], timeout=60)
seen = {}
with client as c:
    opened = expect(post_sessions.sync(client=c, body=OpenRequestType0()), SessionInfo, "open")
    sid = opened.session_id
    seen["opened"] = str(opened.state)

    nav = expect(
        post_sessions_id_navigate.sync(sid, client=c, body=NavigateReq(url=page)),
        Navigated,
        "navigate",
    )
    seen["title"] = nav.title

    snap = expect(
        post_sessions_id_snapshot.sync(sid, client=c, body=SnapshotReq(max_nodes=200)),
        SnapshotResult,
        "snapshot",
    )
    button = next(
        n for n in refs(snap.nodes) if n.role == "button" and isinstance(n.ref, str)
    )
    seen["button"] = button.name
    # A selector that matches nothing, while the page is still (the button
    # below submits its form and replaces the document).
    missing = expect(
        post_sessions_id_click.sync(
            sid, client=c, body=ElementReqType1(selector="#nope", timeout_ms=2000)
        ),
        PostSessionsIdClickResponse422,
        "click on nothing",
    )
    seen["missing"] = missing.error.code
    clicked = post_sessions_id_click.sync_detailed(sid, client=c, body=ElementReqType2(ref=button.ref))
    seen["click"] = clicked.status_code.value

    asked = post_grants_requests.sync_detailed(
        client=c,
        body=NewGrantRequest(domains=["127.0.0.1"], reason="generated-client check"),
    )
    grant = expect(asked.parsed, GrantStatus, "grant request")
    seen["grant_status"] = asked.status_code.value
    polled = expect(
        get_grants_requests_id.sync(grant.request_id, client=c), GrantStatus, "grant poll"
    )
    seen["grant_state"] = str(polled.state)

    closed = expect(delete_sessions_id.sync(sid, client=c), SessionInfo, "close")
    seen["closed"] = str(closed.state)
    gone = expect(
        post_sessions_id_navigate.sync(sid, client=c, body=NavigateReq(url=page)),
        PostSessionsIdNavigateResponse410,
        "navigate after close",
    )
    seen["after_close"] = gone.error.code

print(json.dumps(seen))
