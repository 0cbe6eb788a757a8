"""browser-use (PyPI `browser-use`) driving a Cordon session over its CDP
endpoint, without a model: connect, navigate, read the page's interactive
elements, type, click, screenshot, a second tab, disconnect. Run by
end2end/tests/browser_use.test.js with the session's CDP URL (and the API
key as a header, or a single-use token URL), it prints one JSON line of
what it saw. Telemetry and cloud sync are off: nothing leaves loopback.
"""

import asyncio
import json
import os
import sys

os.environ['ANONYMIZED_TELEMETRY'] = 'false'
os.environ['BROWSER_USE_CLOUD_SYNC'] = 'false'
os.environ.setdefault('BROWSER_USE_LOGGING_LEVEL', 'warning')

from browser_use import BrowserSession  # noqa: E402
from browser_use.browser.events import (  # noqa: E402
    ClickElementEvent,
    NavigateToUrlEvent,
    TypeTextEvent,
)


async def until(what, check, seconds=30.0):
    """Polls `check` (async) until it answers something truthy."""
    deadline = asyncio.get_event_loop().time() + seconds
    last = None
    while asyncio.get_event_loop().time() < deadline:
        last = await check()
        if last:
            return last
        await asyncio.sleep(0.2)
    raise TimeoutError(f'waiting for {what}; last: {last!r}')


async def main():
    cdp_url, page_url, second_url = sys.argv[1], sys.argv[2], sys.argv[3]
    key = os.environ.get('CORDON_KEY')
    headers = {'Authorization': f'Bearer {key}'} if key else None
    session = BrowserSession(cdp_url=cdp_url, headers=headers, keep_alive=False)
    seen = {}
    try:
        await asyncio.wait_for(session.start(), 30)
    except Exception as e:  # noqa: BLE001 - what the client reports is the result
        say({'refused': f'{type(e).__name__}: {e}'[:500]})
    try:
        event = session.event_bus.dispatch(NavigateToUrlEvent(url=page_url))
        await event
        await event.event_result(raise_if_any=True, raise_if_none=False)
        seen['url'] = await session.get_current_page_url()

        async def element(ident):
            state = await session.get_browser_state_summary(include_screenshot=False)
            for node in state.dom_state.selector_map.values():
                if node.attributes.get('id') == ident:
                    return node
            return None

        name = await until('the name field', lambda: element('name'))
        event = session.event_bus.dispatch(TypeTextEvent(node=name, text='from browser-use'))
        await event
        await event.event_result(raise_if_any=True, raise_if_none=False)
        save = await until('the save button', lambda: element('save'))
        event = session.event_bus.dispatch(ClickElementEvent(node=save))
        await event
        await event.event_result(raise_if_any=True, raise_if_none=False)

        async def title():
            cdp = await session.get_or_create_cdp_session()
            got = await cdp.cdp_client.send.Runtime.evaluate(
                params={'expression': 'document.title', 'returnByValue': True},
                session_id=cdp.session_id,
            )
            return got.get('result', {}).get('value', '')

        async def titled():
            t = await title()
            return t if t.startswith('saved') else None

        seen['typed'] = await title()
        seen['title'] = await until('the saved title', titled)
        shot = await session.take_screenshot()
        seen['screenshot_bytes'] = len(shot or b'')
        await session.navigate_to(second_url, new_tab=True)
        seen['second_url'] = await session.get_current_page_url()
        seen['tabs'] = len(await session.get_tabs())
    finally:
        await session.stop()
    say(seen)


def say(what):
    """Prints the result and exits at once: browser-use's background tasks
    may keep a refused client's loop alive."""
    print(json.dumps(what), flush=True)
    os._exit(0)


asyncio.run(main())
