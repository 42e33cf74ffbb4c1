// Remembers the browser's time zone so the server renders times in it (UTC stays on hover).
(function () {
  var zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  if (zone && document.cookie.indexOf("tz=" + zone) === -1) {
    document.cookie = "tz=" + zone + ";path=/;max-age=31536000;samesite=lax";
  }
})();

// Live refresh runs only while the tab is visible: a polling request (an element marked
// data-poll) is cancelled while the page is hidden, and the page refreshes when shown again.
document.addEventListener("htmx:beforeRequest", function (event) {
  if (document.hidden && event.detail.elt.hasAttribute("data-poll")) {
    event.preventDefault();
  }
});
document.addEventListener("visibilitychange", function () {
  if (!document.hidden && window.htmx) {
    document.querySelectorAll("[data-poll]").forEach(function (elt) {
      window.htmx.trigger(elt, "refresh");
    });
  }
});
