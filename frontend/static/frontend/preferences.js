/* The preference center's few lines of script; HTMX does the rest.
 *
 * Each form posts on change and its live region (.p-status, role="status") gets the server's
 * answer: "Saved", or why not (4xx answers carry that text in the person's language, so they are
 * swapped in too). The region first says "Saving…", so a second "Saved" is announced again. A switch
 * whose change did not stick is flipped back, so the page never shows what the server does not have.
 */
(function () {
  "use strict";

  function statusOf(form) {
    return form ? form.querySelector(".p-status") : null;
  }

  function flipBack(form) {
    var input = form && form.matches(".p-toggle, .p-stop") ? form.querySelector("input[role=switch]") : null;
    if (input) input.checked = !input.checked;
  }

  document.addEventListener("htmx:beforeRequest", function (event) {
    var status = statusOf(event.target.closest("form"));
    if (status) status.textContent = status.dataset.saving || "";
  });

  document.addEventListener("htmx:beforeSwap", function (event) {
    var code = event.detail.xhr.status;
    if (code >= 400 && code < 500) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
      flipBack(event.target.closest("form"));
    }
  });

  function failed(event) {
    var form = event.target.closest("form");
    var status = statusOf(form);
    if (status) {
      var message = document.createElement("span");
      message.className = "p-error";
      message.textContent = status.dataset.failed || "";
      status.replaceChildren(message);
    }
    flipBack(form);
  }

  document.addEventListener("htmx:sendError", failed);
  document.addEventListener("htmx:responseError", failed);
})();
