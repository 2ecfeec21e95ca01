/* agac live views. An element with data-live="URL" opens a Server-Sent Events stream
   there. Each "swap" event carries HTML fragments rendered (and escaped) by the server;
   every top-level element of it replaces the element of the page with the same id.
   "end" closes the stream. No other script runs on agac's pages. */
(function () {
  "use strict";

  function swap(html) {
    var holder = document.createElement("template");
    holder.innerHTML = html;
    Array.prototype.slice.call(holder.content.children).forEach(function (node) {
      var old = node.id ? document.getElementById(node.id) : null;
      if (old) {
        old.replaceWith(node);
      }
    });
  }

  function follow(element) {
    var source = new EventSource(element.getAttribute("data-live"));
    element.setAttribute("data-live-state", "connecting");
    source.onopen = function () {
      element.setAttribute("data-live-state", "open");
    };
    source.onerror = function () {
      element.setAttribute("data-live-state", "reconnecting");
    };
    source.addEventListener("swap", function (event) {
      swap(event.data);
      element.setAttribute("data-live-updates",
        String(Number(element.getAttribute("data-live-updates") || "0") + 1));
    });
    source.addEventListener("end", function () {
      source.close();
      element.setAttribute("data-live-state", "ended");
    });
  }

  document.querySelectorAll("[data-live]").forEach(follow);
}());
