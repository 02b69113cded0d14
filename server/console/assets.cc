#include "server/console/assets.h"

namespace dpopt::server::console {

const char kShellHtml[] = R"html(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>dpopt console</title>
<link rel="stylesheet" href="/console/static/console.css">
<script src="/console/static/console.js" defer></script>
</head>
<body>
<header>
  <a class="brand" href="/console/">dpopt</a>
  <nav><a href="/console/">Datasets</a><a href="/console/jobs">Jobs</a></nav>
  <span id="who"></span>
  <button id="logout" type="button">Log out</button>
</header>
<main id="main" aria-live="polite"><p class="loading">Loading&hellip;</p></main>
<footer>Read-only view of what the dpopt API releases to you: public
metadata, privacy budgets, the ledger, and privatized job outputs.</footer>
</body>
</html>
)html";

const char kLoginHtml[] = R"html(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>dpopt console: log in</title>
<link rel="stylesheet" href="/console/static/console.css">
<script src="/console/static/console.js" defer></script>
</head>
<body>
<header><a class="brand" href="/console/">dpopt</a></header>
<main>
<h1>Log in</h1>
<form id="login" method="post" autocomplete="off">
  <label for="token">Bearer token (as for the CLI: <code>ID.SECRET</code>)</label>
  <input id="token" name="token" type="password" required spellcheck="false">
  <button id="login-button" type="submit" disabled>Log in</button>
  <p id="login-error" class="error" hidden></p>
</form>
<p class="note">The token stays in this tab's session storage and is sent
only to this server, in the Authorization header.</p>
</main>
</body>
</html>
)html";

const char kConsoleJs[] = R"js('use strict';
(function () {
  const KEY = 'dpopt-token';
  const WHO = 'dpopt-who';
  const path = location.pathname;

  function api(sub) {
    return fetch('/console/api' + sub, {
      headers: {'Authorization': 'Bearer ' + (sessionStorage.getItem(KEY) || '')},
      cache: 'no-store', credentials: 'omit'
    });
  }

  function toLogin() {
    sessionStorage.removeItem(KEY);
    sessionStorage.removeItem(WHO);
    location.replace('/console/login?next=' + encodeURIComponent(path));
  }

  if (path === '/console/login') {
    const form = document.getElementById('login');
    const err = document.getElementById('login-error');
    // Enabled only once this handler is attached: the form never submits
    // the token itself.
    document.getElementById('login-button').disabled = false;
    form.addEventListener('submit', async function (e) {
      e.preventDefault();
      sessionStorage.setItem(KEY, document.getElementById('token').value.trim());
      const r = await api('/whoami');
      if (!r.ok) {
        sessionStorage.removeItem(KEY);
        err.textContent = r.status === 401 ? 'Unknown, revoked or expired token.'
                                           : 'Login failed (HTTP ' + r.status + ').';
        err.hidden = false;
        return;
      }
      sessionStorage.setItem(WHO, await r.text());
      const next = new URLSearchParams(location.search).get('next') || '';
      location.replace(/^\/console\/[^/]/.test(next) || next === '/console/' ? next : '/console/');
    });
    return;
  }

  if (!sessionStorage.getItem(KEY)) { toLogin(); return; }
  try {
    const who = JSON.parse(sessionStorage.getItem(WHO) || '{}');
    const role = (who.role || '').replace('ROLE_', '').toLowerCase();
    document.getElementById('who').textContent = who.name ? who.name + ' (' + role + ')' : '';
  } catch (e) { /* no name shown */ }
  document.getElementById('logout').addEventListener('click', function () {
    sessionStorage.removeItem(KEY);
    sessionStorage.removeItem(WHO);
    location.replace('/console/login');
  });

  const main = document.getElementById('main');
  const sub = path.replace(/^\/console/, '');
  const route = (sub === '' || sub === '/') ? '/datasets' : sub;
  let timer = null;

  async function load() {
    let r;
    try {
      r = await api(route);
    } catch (e) {
      main.dataset.status = '0';
      main.innerHTML = '<div class="error">The server is not reachable.</div>';
      timer = setTimeout(load, 5000);
      return;
    }
    if (r.status === 401) { toLogin(); return; }
    // Fragments are rendered by the server with every value HTML-escaped.
    main.innerHTML = await r.text();
    main.dataset.status = String(r.status);
    const h1 = main.querySelector('h1');
    document.title = (h1 ? h1.textContent + ' - ' : '') + 'dpopt console';
    if (main.querySelector('[data-live="1"]')) timer = setTimeout(load, 2000);
    else main.dataset.settled = '1';
  }
  load();
})();
)js";

const char kConsoleCss[] = R"css(
:root { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; color: #222; }
body { margin: 0; background: #f6f7f9; }
header { display: flex; gap: 1.5em; align-items: center; padding: .6em 1.2em;
         background: #1f2d3d; color: #fff; }
header a { color: #dfe8f1; text-decoration: none; margin-right: 1em; }
header .brand { font-weight: bold; font-size: 1.2em; color: #fff; }
header #who { margin-left: auto; font-size: .9em; }
main { padding: 1em 1.5em; max-width: 1200px; }
footer { padding: 1em 1.5em; color: #777; font-size: .8em; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 1.6em; }
table { border-collapse: collapse; background: #fff; font-size: .9em; }
th, td { border: 1px solid #dde; padding: .3em .6em; text-align: left; vertical-align: top; }
th { background: #eef1f5; }
td.empty { color: #888; font-style: italic; }
dl.facts { display: grid; grid-template-columns: max-content auto; gap: .2em 1em; }
dl.facts dt { color: #555; } dl.facts dd { margin: 0; }
pre { background: #fff; border: 1px solid #dde; padding: .6em; overflow-x: auto; font-size: .85em; }
.error { background: #fdecea; border: 1px solid #e6a5a0; padding: .6em; }
.note { color: #555; font-size: .85em; max-width: 60em; }
.state { padding: .1em .4em; border-radius: 3px; font-size: .85em; background: #ddd; }
.state-SUCCEEDED { background: #d4edda; } .state-RUNNING { background: #d6eaf8; }
.state-QUEUED, .state-PENDING_APPROVAL { background: #fdf2d0; } .state-FAILED, .state-CANCELLED, .state-REJECTED { background: #f8d7da; }
.dry-run { padding: .1em .4em; border-radius: 3px; font-size: .85em; background: #ffe08a; font-weight: bold; }
.plots { display: flex; flex-wrap: wrap; gap: 1em; }
svg.plot { background: #fff; border: 1px solid #dde; font-family: inherit; }
form#login { display: flex; flex-direction: column; gap: .5em; max-width: 30em; }
input, button { font-size: 1em; padding: .3em .5em; }
)css";

}  // namespace dpopt::server::console
