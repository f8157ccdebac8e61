/*
 * The inbox page's times, as the widget shows them: "3 minutes ago", "yesterday", in the page's
 * language (Intl.RelativeTimeFormat, the widget's own NotifyInbox.relativeTime). The server's date
 * and time stays as the tooltip, and is what a browser without this script shows. Times are
 * rewritten when the list is re-rendered (htmx) and every minute, so "just now" does not stay.
 */
(function () {
  "use strict";

  var lang = (document.documentElement.lang || "en").toLowerCase().split("-")[0];

  function relabel(root) {
    var times = (root || document).querySelectorAll("time.inbox-time[datetime]");
    for (var i = 0; i < times.length; i++) {
      var time = times[i];
      if (!time.title) time.title = time.textContent.trim();
      time.textContent = window.NotifyInbox.relativeTime(time.dateTime, lang);
    }
  }

  function start() {
    relabel(document);
    document.body.addEventListener("htmx:afterSettle", function () { relabel(document); });
    setInterval(function () { relabel(document); }, 60000);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
