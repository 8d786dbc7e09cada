// Live updates: pages marked data-refresh re-fetch themselves and swap in
// every element marked data-live (matched by id). Without this script the
// pages show the figures of the moment they were loaded.
(function () {
  "use strict";
  var body = document.body;
  var every = parseInt(body.getAttribute("data-refresh") || "0", 10);
  if (!every || !window.fetch || !window.DOMParser) {
    return;
  }
  var state = document.getElementById("live-state");
  function refresh() {
    if (document.hidden) {
      return;
    }
    fetch(window.location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) {
        if (!r.ok) { throw new Error("HTTP " + r.status); }
        return r.text();
      })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        document.querySelectorAll("[data-live]").forEach(function (el) {
          var fresh = el.id && doc.getElementById(el.id);
          if (fresh) { el.replaceWith(document.importNode(fresh, true)); }
        });
        if (state) { state.textContent = "live · " + new Date().toLocaleTimeString(); }
      })
      .catch(function (e) {
        if (state) { state.textContent = "not updating: " + e.message; }
      });
  }
  setInterval(refresh, every);
})();
