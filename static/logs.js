// The logs page (templates/jobs/logs.html): a search that hides the lines without the text as one
// types (the server did the same for the `q` it was sent), and a followed tail that keeps its
// scroll: at the bottom when it was at the bottom, where it was otherwise; a kept log opened at
// one line (#L41) scrolled to it.
(function () {
  function filterLines() {
    var box = document.getElementById("log-q");
    var needle = box ? box.value.toLowerCase() : "";
    var shown = 0;
    document.querySelectorAll("[data-log] .log-line").forEach(function (line) {
      var match = line.textContent.toLowerCase().indexOf(needle) !== -1;
      line.hidden = !match;
      shown += match ? 1 : 0;
    });
    var count = document.querySelector("[data-log-matches]");
    if (count) {
      count.textContent = String(shown);
    }
  }

  // The scroll of the log being replaced ({bottom, top}); null while no refresh is under way.
  var kept = null;
  document.addEventListener("htmx:beforeSwap", function (event) {
    if (event.detail.target.id !== "log-view" || !event.detail.shouldSwap) {
      return;
    }
    var log = document.querySelector("[data-log]");
    kept = log
      ? { bottom: log.scrollTop + log.clientHeight >= log.scrollHeight - 8, top: log.scrollTop }
      : { bottom: true, top: 0 };
  });
  document.addEventListener("htmx:afterSettle", function () {
    if (kept === null) {
      return;
    }
    var log = document.querySelector("[data-log]");
    if (log) {
      filterLines();
      log.scrollTop = kept.bottom ? log.scrollHeight : kept.top;
    }
    kept = null;
  });

  function start() {
    var box = document.getElementById("log-q");
    if (box) {
      box.addEventListener("input", filterLines);
    }
    var log = document.querySelector("[data-log]");
    if (!log) {
      return;
    }
    // A link to one line (#L41, from the failure banner) shows that line; else the newest.
    var target = location.hash ? document.getElementById(location.hash.slice(1)) : null;
    if (target && log.contains(target)) {
      target.hidden = false;
      log.scrollTop = target.offsetTop - log.offsetTop - log.clientHeight / 3;
    } else {
      log.scrollTop = log.scrollHeight;
    }
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
