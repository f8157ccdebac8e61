// The composer and review pages: instants in the viewer's own time, and the browser's time zone as the default.
(function () {
  "use strict";
  var format = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });

  function localTimes(root) {
    root.querySelectorAll("time.cmp-local").forEach(function (el) {
      var instant = new Date(el.getAttribute("datetime"));
      if (!isNaN(instant)) { el.textContent = format.format(instant); }
    });
  }

  function defaultZone() {
    var zone = document.querySelector("input[name=zone]");
    var browser = Intl.DateTimeFormat().resolvedOptions().timeZone;
    // Only on a new form: a saved campaign's instants were shown in the zone the server wrote them in.
    if (zone && browser && zone.value === "UTC" && !document.querySelector("input[name=send_at]").value
        && !document.querySelector("input[name=end_at]").value) {
      zone.value = browser;
    }
  }

  document.addEventListener("DOMContentLoaded", function () { localTimes(document); defaultZone(); });
  document.addEventListener("htmx:afterSettle", function (event) { localTimes(event.target); });
})();
