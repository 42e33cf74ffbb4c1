// The create page's tabs (templates/jobs/new.html) swap the spec in place with htmx; the
// keyboard focus then goes to the tab now shown, as it would after following a link.
document.addEventListener("htmx:afterSettle", function (event) {
  var trigger = event.detail.requestConfig && event.detail.requestConfig.elt;
  if (!trigger || trigger.name !== "switch") {
    return;
  }
  var current = document.querySelector("#job-spec .tabs [aria-current]");
  if (current) {
    current.focus();
  }
});
