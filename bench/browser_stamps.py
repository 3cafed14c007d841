"""When an answer's first and last words appear in the browser, for the page benchmarks.

``OBSERVE`` (run with ``page.evaluate(OBSERVE, [first, last])`` just before sending)
stamps ``window.__stamps.first`` / ``.last`` with ``performance.now()`` as a
MutationObserver sees those words; ``.start`` is the moment it was installed.
"""

CHAT_INPUT = "textarea[data-testid='stChatInputTextArea']"
OBSERVE = """([first, last]) => {
  window.__stamps = {start: performance.now()};
  const seen = () => {
    const text = document.body.innerText;
    if (!window.__stamps.first && text.includes(first)) window.__stamps.first = performance.now();
    if (!window.__stamps.last && text.includes(last)) window.__stamps.last = performance.now();
  };
  window.__observer && window.__observer.disconnect();
  window.__observer = new MutationObserver(seen);
  window.__observer.observe(document.body, {subtree: true, childList: true, characterData: true});
}"""
