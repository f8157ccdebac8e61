/*
 * Notify in-app inbox widget: a bell with an unread badge and a panel of messages, live over a
 * WebSocket (protocol: README "In-app inbox"). One file, no build step, no dependencies.
 *
 * Declarative — the script mounts every element that carries data-notify-inbox:
 *   <script src="https://notify.example.com/static/inbox/widget.js" defer></script>
 *   <div data-notify-inbox data-token="…" data-token-url="/my-backend/inbox-token" data-lang="ar"></div>
 *     data-token       a token from POST /api/v1/users/{id}/inbox-token (your backend fetches it)
 *     data-token-url   optional: POST here for a fresh token ({"token": …}) when one expires
 *     data-ws-url      optional: the socket URL; default /ws/inbox/ on the origin this script came from
 *     data-lang        en, ar or fa (labels and direction); default <html lang>
 *     data-panel="off" the bell and badge only (a page that lists messages itself)
 *
 * Programmatic:
 *   const client = NotifyInbox.connect({token, getToken: async () => "…"});
 *   NotifyInbox.mount(document.getElementById("bell"), client, {lang: "ar"});
 *   client.addEventListener("message", (e) => console.log(e.detail));   // also: change, unread, status
 *
 * Every change also fires "inboxchanged" on <body>, for pages that re-render (htmx: hx-trigger).
 */
(function () {
  "use strict";

  var CLOSE_INVALID_TOKEN = 4401; // do not retry with the same token
  var CLOSE_EXPIRED_TOKEN = 4403; // fetch a new token, then reconnect at once
  // Reconnect delays: full jitter, uniform(0, min(cap, base * 2^attempt)) — a restarted server is not
  // hit by every client in the same instant (AWS Architecture Blog, "Exponential Backoff And Jitter").
  var BACKOFF_BASE_MS = 500;
  var BACKOFF_CAP_MS = 30000;
  var KEEP_MESSAGES = 200; // newest messages kept in memory

  var SCRIPT = document.currentScript;
  var SCRIPT_ORIGIN = SCRIPT && SCRIPT.src ? new URL(SCRIPT.src, location.href).origin : location.origin;

  function defaultSocketUrl() {
    return SCRIPT_ORIGIN.replace(/^http/, "ws") + "/ws/inbox/";
  }

  function backoffDelay(attempt) {
    return Math.random() * Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * Math.pow(2, attempt));
  }

  // ---- the client: socket, reconnects, catch-up, state ------------------------------------------

  function InboxClient(options) {
    var target = document.createElement("span"); // an EventTarget that works in every browser
    this._target = target;
    this.url = options.url || defaultSocketUrl();
    this.token = options.token || null;
    this.getToken = options.getToken || null;
    this.messages = new Map(); // id → message (protocol shape)
    this.unread = 0;
    this.lastId = 0; // the newest id this client has seen; the cursor of "sync"
    this.status = "connecting"; // connecting | open | offline | refused
    this._attempt = 0;
    this._greeted = false; // true after the first hello: later hellos are reconnects
    this._stopped = false;
    this._socket = null;
    this._timer = null;
  }

  InboxClient.prototype.addEventListener = function (type, fn) {
    this._target.addEventListener(type, fn);
  };
  InboxClient.prototype.removeEventListener = function (type, fn) {
    this._target.removeEventListener(type, fn);
  };
  InboxClient.prototype._emit = function (type, detail) {
    this._target.dispatchEvent(new CustomEvent(type, { detail: detail }));
  };

  InboxClient.prototype.start = function () {
    this._stopped = false;
    this._open();
    return this;
  };

  InboxClient.prototype.stop = function () {
    this._stopped = true;
    clearTimeout(this._timer);
    if (this._socket) this._socket.close(1000);
  };

  InboxClient.prototype._setStatus = function (status) {
    if (this.status === status) return;
    this.status = status;
    this._emit("status", status);
  };

  InboxClient.prototype._open = function () {
    var self = this;
    if (!this.token) {
      if (!this.getToken) return this._refused();
      Promise.resolve()
        .then(function () { return self.getToken(); })
        .then(function (token) { self.token = token; self._open(); })
        .catch(function () { self._retryLater(); });
      return;
    }
    var socket = new WebSocket(this.url + "?token=" + encodeURIComponent(this.token));
    this._socket = socket;
    socket.onmessage = function (event) {
      var message;
      try { message = JSON.parse(event.data); } catch (e) { return; }
      self._receive(message);
    };
    socket.onclose = function (event) {
      if (self._socket === socket) self._socket = null;
      self._closed(event.code);
    };
  };

  InboxClient.prototype._closed = function (code) {
    if (this._stopped) return;
    if (code === CLOSE_EXPIRED_TOKEN || code === CLOSE_INVALID_TOKEN) {
      this.token = null;
      if (!this.getToken) return this._refused();
      if (code === CLOSE_EXPIRED_TOKEN && this._attempt === 0) {
        this._attempt = 1; // a second refusal in a row backs off: the clocks may disagree
        this._setStatus("connecting");
        return this._open();
      }
    }
    this._retryLater();
  };

  InboxClient.prototype._retryLater = function () {
    var self = this;
    this._setStatus("offline");
    var delay = backoffDelay(this._attempt);
    this._attempt = Math.min(this._attempt + 1, 16);
    clearTimeout(this._timer);
    this._timer = setTimeout(function () { self._open(); }, delay);
  };

  InboxClient.prototype._refused = function () {
    this._setStatus("refused");
  };

  InboxClient.prototype._send = function (command) {
    if (!this._socket || this._socket.readyState !== 1) return false;
    this._socket.send(JSON.stringify(command));
    return true;
  };

  InboxClient.prototype._merge = function (messages) {
    for (var i = 0; i < messages.length; i++) {
      var message = messages[i];
      this.messages.set(message.id, message);
      if (message.id > this.lastId) this.lastId = message.id;
    }
    if (this.messages.size > KEEP_MESSAGES) {
      var ids = Array.from(this.messages.keys()).sort(function (a, b) { return a - b; });
      for (var j = 0; j < ids.length - KEEP_MESSAGES; j++) this.messages.delete(ids[j]);
    }
  };

  InboxClient.prototype._mark = function (ids, field, at) {
    for (var i = 0; i < ids.length; i++) {
      var message = this.messages.get(ids[i]);
      if (message) message[field] = at;
    }
  };

  InboxClient.prototype._changed = function (event) {
    this._emit("change", event);
    document.body && document.body.dispatchEvent(new CustomEvent("inboxchanged", { detail: event }));
  };

  InboxClient.prototype._receive = function (event) {
    switch (event.type) {
      case "hello": {
        var reconnect = this._greeted;
        var resumeFrom = this.lastId;
        this._greeted = true;
        this._attempt = 0;
        this._setStatus("open");
        this._merge(event.messages);
        this._setUnread(event.unread);
        if (reconnect) {
          // Ask for everything after the last message seen, in order, once; the page of the
          // hello refreshed the read/archived state of the newest messages.
          this._send({ type: "sync", after: resumeFrom });
          this._changed(event);
        } else {
          this.lastId = Math.max(this.lastId, event.last_id);
          this._emit("change", event);
        }
        break;
      }
      case "sync":
        this._merge(event.messages);
        if (event.more && event.messages.length) {
          this._send({ type: "sync", after: event.messages[event.messages.length - 1].id });
        }
        if (event.messages.length) this._changed(event);
        break;
      case "message.new":
        this._merge([event.message]);
        this._emit("message", event.message);
        this._changed(event);
        break;
      case "message.read":
        this._mark(event.ids, "read_at", event.read_at);
        this._changed(event);
        break;
      case "message.archived":
        this._mark(event.ids, "archived_at", event.archived_at);
        this._changed(event);
        break;
      case "unread":
        this._setUnread(event.count);
        break;
      case "error":
        this._emit("error", event);
        break;
    }
  };

  InboxClient.prototype._setUnread = function (count) {
    if (this.unread === count) return;
    this.unread = count;
    this._emit("unread", count);
  };

  /** Messages to show, newest first (archived ones left out). */
  InboxClient.prototype.visible = function () {
    return Array.from(this.messages.values())
      .filter(function (message) { return !message.archived_at; })
      .sort(function (a, b) { return b.id - a.id; });
  };

  InboxClient.prototype.read = function (id) { return this._send({ type: "read", id: id }); };
  InboxClient.prototype.archive = function (id) { return this._send({ type: "archive", id: id }); };
  /** Mark read everything up to the newest message this client has shown; later arrivals stay unread. */
  InboxClient.prototype.readAll = function () { return this._send({ type: "read_all", through: this.lastId }); };

  // ---- the bell: badge, panel, labels -----------------------------------------------------------

  var LABELS = {
    en: {
      inbox: "Notifications", markAllRead: "Mark all as read", markRead: "Mark as read", archive: "Archive",
      empty: "No messages yet.", offline: "Reconnecting…", refused: "Sign in again to see new messages.",
      unread: function (n) { return n === 1 ? "1 unread notification" : n + " unread notifications"; },
    },
    ar: {
      inbox: "الإشعارات", markAllRead: "تعليم الكل كمقروء", markRead: "تعليم كمقروء", archive: "أرشفة",
      empty: "لا توجد رسائل بعد.", offline: "جارٍ إعادة الاتصال…", refused: "سجّل الدخول مجددًا لرؤية الرسائل الجديدة.",
      unread: function (n) { return "إشعارات غير مقروءة: " + n; },
    },
    fa: {
      inbox: "اعلان‌ها", markAllRead: "علامت‌گذاری همه به‌عنوان خوانده‌شده", markRead: "خوانده شد", archive: "بایگانی",
      empty: "هنوز پیامی نیست.", offline: "در حال اتصال دوباره…", refused: "برای دیدن پیام‌های تازه دوباره وارد شوید.",
      unread: function (n) { return "اعلان‌های خوانده‌نشده: " + n; },
    },
  };
  // The page's own dir when it is in the widget's language: the server set it from CLDR
  // (locales.text_direction). Otherwise the browser's CLDR data (Intl.Locale text info).
  function textDirection(lang) {
    var page = document.documentElement;
    if (page.dir && (page.lang || "").toLowerCase().split("-")[0] === lang) return page.dir;
    try {
      var locale = new Intl.Locale(lang);
      var info = locale.getTextInfo ? locale.getTextInfo() : locale.textInfo;
      return info && info.direction === "rtl" ? "rtl" : "ltr";
    } catch (e) {
      return "ltr";
    }
  }

  var CSS = [
    ".nb{position:relative;display:inline-block;font:14px/1.4 system-ui,'Noto Sans Arabic','DejaVu Sans',sans-serif;color:#1d2330}",
    ".nb-bell{position:relative;display:inline-flex;align-items:center;justify-content:center;width:2.5rem;height:2.5rem;",
    "border:1px solid #dde2ea;border-radius:50%;background:#fff;color:inherit;cursor:pointer;padding:0}",
    ".nb-bell:hover,.nb-bell[aria-expanded=true]{border-color:#2450d8;color:#2450d8}",
    ".nb-bell svg{width:1.25rem;height:1.25rem}",
    ".nb-badge{position:absolute;inset-block-start:-.3rem;inset-inline-end:-.3rem;min-width:1.25rem;height:1.25rem;padding:0 .3rem;",
    "border-radius:.625rem;background:#d92d20;color:#fff;font-size:.75rem;font-weight:700;line-height:1.25rem;text-align:center}",
    ".nb-badge[data-count='0']{display:none}",
    ".nb.is-offline .nb-bell{opacity:.6}",
    ".nb-panel{position:absolute;inset-block-start:calc(100% + .5rem);inset-inline-end:0;z-index:2147483000;width:min(22rem,90vw);",
    "max-height:26rem;display:flex;flex-direction:column;background:#fff;border:1px solid #dde2ea;border-radius:.6rem;",
    "box-shadow:0 10px 30px rgba(29,35,48,.15);text-align:start}",
    ".nb-panel[hidden]{display:none}",
    ".nb-head{display:flex;justify-content:space-between;align-items:center;gap:.5rem;padding:.6rem .8rem;border-block-end:1px solid #dde2ea}",
    ".nb-head strong{font-size:.95rem}",
    ".nb-status{padding:.3rem .8rem;font-size:.8rem;color:#8a5a00;background:#fff7e6}",
    ".nb-status:empty{display:none}",
    ".nb-list{list-style:none;margin:0;padding:0;overflow-y:auto}",
    ".nb-item{padding:.6rem .8rem;border-block-end:1px solid #eef0f4;border-inline-start:3px solid transparent}",
    ".nb-item.is-unread{background:#eef3ff;border-inline-start-color:#2450d8}",
    ".nb-item.is-unread .nb-title{font-weight:700}",
    ".nb-title{margin:0;font-size:.9rem}.nb-title a{color:#2450d8}",
    ".nb-body{margin:.15rem 0 0;color:#5b6475;font-size:.85rem;white-space:pre-line}",
    ".nb-meta{display:flex;justify-content:space-between;align-items:center;gap:.5rem;margin-block-start:.35rem}",
    ".nb-time{color:#8b93a3;font-size:.75rem}",
    ".nb-actions{display:flex;gap:.3rem}",
    ".nb button.nb-link{border:0;background:none;color:#2450d8;cursor:pointer;font:inherit;font-size:.78rem;padding:.1rem .2rem}",
    ".nb button.nb-link:hover{text-decoration:underline}.nb button.nb-link[disabled]{color:#8b93a3;cursor:default;text-decoration:none}",
    ".nb-empty{padding:1.5rem .8rem;text-align:center;color:#5b6475}",
  ].join("");

  var BELL_SVG =
    '<svg viewBox="0 0 24 24" fill="none" stroke="currentColor" stroke-width="2" stroke-linecap="round" ' +
    'stroke-linejoin="round" aria-hidden="true"><path d="M18 8a6 6 0 1 0-12 0c0 7-3 9-3 9h18s-3-2-3-9"/>' +
    '<path d="M13.73 21a2 2 0 0 1-3.46 0"/></svg>';

  function injectStyle() {
    if (document.getElementById("nb-style")) return;
    var style = document.createElement("style");
    style.id = "nb-style";
    style.textContent = CSS;
    document.head.appendChild(style);
  }

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text != null) node.textContent = text; // never innerHTML: titles and bodies are user data
    return node;
  }

  function parseUrl(link, base) {
    try {
      return base === undefined ? new URL(link) : new URL(link, base);
    } catch (e) {
      return null;
    }
  }

  function safeHref(link) {
    // The server keeps only http(s) URLs and site paths (inbox/provider.py); check again, on the URL the
    // browser will open (WHATWG URL), not on the text: "/\evil.example" or "/\t/evil.example" leave the site.
    if (typeof link !== "string" || !link) return "";
    var absolute = parseUrl(link);
    if (absolute) {
      var web = absolute.protocol === "https:" || absolute.protocol === "http:";
      return web && !absolute.username && !absolute.password ? absolute.href : "";
    }
    var onSite = parseUrl(link, location.origin);
    return onSite && onSite.origin === location.origin ? onSite.href : "";
  }

  function relativeTime(iso, lang) {
    var seconds = (new Date(iso).getTime() - Date.now()) / 1000;
    var units = [["year", 31536000], ["month", 2592000], ["day", 86400], ["hour", 3600], ["minute", 60]];
    var format = new Intl.RelativeTimeFormat(lang, { numeric: "auto" });
    for (var i = 0; i < units.length; i++) {
      if (Math.abs(seconds) >= units[i][1]) return format.format(Math.round(seconds / units[i][1]), units[i][0]);
    }
    return format.format(0, "second");
  }

  function mount(root, client, options) {
    options = options || {};
    var lang = (options.lang || document.documentElement.lang || "en").toLowerCase().split("-")[0];
    var labels = LABELS[lang] || LABELS.en;
    var withPanel = options.panel !== false;
    injectStyle();
    root.classList.add("nb");
    root.dir = options.dir || textDirection(lang);
    root.lang = lang;

    // Without a panel the bell only shows the count: a status, not a button that does nothing.
    var bell = el(withPanel ? "button" : "span", "nb-bell");
    if (withPanel) bell.type = "button";
    else bell.setAttribute("role", "status");
    bell.innerHTML = BELL_SVG; // a constant, no user data
    var badge = el("span", "nb-badge", "0");
    badge.setAttribute("data-count", "0");
    bell.appendChild(badge);
    root.replaceChildren(bell);

    var panel, list, status, readAll;
    if (withPanel) {
      bell.setAttribute("aria-haspopup", "dialog");
      bell.setAttribute("aria-expanded", "false");
      panel = el("div", "nb-panel");
      panel.hidden = true;
      panel.setAttribute("role", "dialog");
      panel.setAttribute("aria-label", labels.inbox);
      var head = el("div", "nb-head");
      head.appendChild(el("strong", null, labels.inbox));
      readAll = el("button", "nb-link nb-read-all", labels.markAllRead);
      readAll.type = "button";
      readAll.addEventListener("click", function () { client.readAll(); });
      head.appendChild(readAll);
      status = el("div", "nb-status");
      status.setAttribute("role", "status");
      list = el("ol", "nb-list");
      panel.append(head, status, list);
      root.appendChild(panel);
      bell.addEventListener("click", function () { toggle(panel.hidden); });
      document.addEventListener("click", function (event) { if (!root.contains(event.target)) toggle(false); });
      document.addEventListener("keydown", function (event) { if (event.key === "Escape") toggle(false); });
    }

    function toggle(open) {
      if (!panel) return;
      panel.hidden = !open;
      bell.setAttribute("aria-expanded", String(open));
      if (open) renderList();
    }

    function renderBadge() {
      var n = client.unread;
      badge.textContent = n > 99 ? "99+" : String(n);
      badge.setAttribute("data-count", String(n));
      bell.setAttribute("aria-label", labels.inbox + " — " + labels.unread(n));
      root.classList.toggle("is-offline", client.status !== "open");
      if (status) status.textContent = client.status === "offline" ? labels.offline : client.status === "refused" ? labels.refused : "";
      if (readAll) readAll.disabled = n === 0;
    }

    function item(message) {
      var li = el("li", "nb-item" + (message.read_at ? "" : " is-unread"));
      li.setAttribute("data-id", String(message.id));
      var text = el("div");
      text.lang = message.language;
      text.dir = message.dir;
      var title = el("p", "nb-title");
      var href = safeHref(message.link);
      if (href) {
        var a = el("a", null, message.title);
        a.href = href;
        a.rel = "noopener";
        a.addEventListener("click", function () { if (!message.read_at) client.read(message.id); });
        title.appendChild(a);
      } else {
        title.textContent = message.title;
      }
      text.appendChild(title);
      if (message.body) text.appendChild(el("p", "nb-body", message.body));
      li.appendChild(text);
      var meta = el("div", "nb-meta");
      var time = el("time", "nb-time", relativeTime(message.created_at, lang));
      time.dateTime = message.created_at;
      meta.appendChild(time);
      var actions = el("div", "nb-actions");
      if (!message.read_at) actions.appendChild(button(labels.markRead, "nb-read", function () { client.read(message.id); }));
      actions.appendChild(button(labels.archive, "nb-archive", function () { client.archive(message.id); }));
      meta.appendChild(actions);
      li.appendChild(meta);
      return li;
    }

    function button(label, className, onClick) {
      var b = el("button", "nb-link " + className, label);
      b.type = "button";
      b.addEventListener("click", function (event) { event.stopPropagation(); onClick(); });
      return b;
    }

    function renderList() {
      if (!list || panel.hidden) return;
      var messages = client.visible();
      list.replaceChildren.apply(list, messages.length ? messages.map(item) : [el("li", "nb-empty", labels.empty)]);
    }

    var initial = Number(options.unread || 0);
    if (initial && client.status !== "open") client.unread = initial;
    client.addEventListener("unread", renderBadge);
    client.addEventListener("status", renderBadge);
    client.addEventListener("change", function () { renderBadge(); renderList(); });
    renderBadge();
    return { root: root, client: client, open: function () { toggle(true); }, close: function () { toggle(false); } };
  }

  // ---- wiring ------------------------------------------------------------------------------------

  function csrfToken(root) {
    if (root.dataset.csrfToken) return root.dataset.csrfToken;
    var match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
    return match ? decodeURIComponent(match[1]) : "";
  }

  function tokenFetcher(url, root) {
    if (!url) return null;
    return function () {
      return fetch(url, { method: "POST", credentials: "same-origin", headers: { "X-CSRFToken": csrfToken(root) } })
        .then(function (response) {
          if (!response.ok) throw new Error("token endpoint answered " + response.status);
          return response.json();
        })
        .then(function (body) { return body.token; });
    };
  }

  var clients = [];

  function connect(options) {
    var client = new InboxClient(options || {});
    clients.push(client);
    return client.start();
  }

  function autoMount() {
    var roots = document.querySelectorAll("[data-notify-inbox]");
    for (var i = 0; i < roots.length; i++) {
      var root = roots[i];
      if (root.__notifyInbox) continue;
      var data = root.dataset;
      var client = new InboxClient({
        url: data.wsUrl,
        token: data.token,
        getToken: tokenFetcher(data.tokenUrl, root),
      });
      clients.push(client);
      root.__notifyInbox = mount(root, client, { lang: data.lang, panel: data.panel !== "off", unread: data.unread });
      client.start();
    }
  }

  window.NotifyInbox = {
    connect: connect, mount: mount, InboxClient: InboxClient, clients: clients, backoffDelay: backoffDelay,
    relativeTime: relativeTime, // "3 minutes ago" in a language: the inbox page shows its times with it too
  };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", autoMount);
  else autoMount();
})();
