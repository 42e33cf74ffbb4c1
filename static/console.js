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

// What only works with JavaScript is shown only with it (the copy button).
document.documentElement.classList.add("js");

// A polling element inside a closed <details> (Worker rows folded away) does not poll; opening
// it again refreshes it at once.
document.addEventListener("htmx:beforeRequest", function (event) {
  var elt = event.detail.elt;
  if (elt.hasAttribute("data-poll") && elt.closest("details:not([open])")) {
    event.preventDefault();
  }
});
document.addEventListener("toggle", function (event) {
  var details = event.target;
  if (details.open && window.htmx && details.querySelectorAll) {
    details.querySelectorAll("[data-poll]").forEach(function (elt) {
      window.htmx.trigger(elt, "refresh");
    });
  }
}, true);

// A refreshed fragment keeps the sideways scroll of its wide tables: the scroll offsets of the
// .table-wrap boxes under the swapped element's parent are put back once the swap settled.
var tableScrolls = new Map();
document.addEventListener("htmx:beforeSwap", function (event) {
  var holder = event.detail.target.parentElement;
  if (holder) {
    var offsets = Array.prototype.map.call(holder.querySelectorAll(".table-wrap"), function (wrap) {
      return wrap.scrollLeft;
    });
    tableScrolls.set(holder, offsets);
  }
});
document.addEventListener("htmx:afterSettle", function () {
  tableScrolls.forEach(function (offsets, holder) {
    holder.querySelectorAll(".table-wrap").forEach(function (wrap, index) {
      if (offsets[index]) {
        wrap.scrollLeft = offsets[index];
      }
    });
  });
  tableScrolls.clear();
});

// The troubleshooting record: the text box holds the record as the page was first rendered (it
// is kept across refreshes so a selection is not lost); opening it or "Copy troubleshooting
// record" loads the record as it is now. Copying falls back to a selection for Ctrl+C.
function loadRecord(details) {
  return fetch(details.getAttribute("data-record-url"), { credentials: "same-origin" })
    .then(function (answer) {
      if (!answer.ok) {
        throw new Error(answer.status);
      }
      return answer.text();
    })
    .then(function (text) {
      details.querySelector("textarea").value = text;
      return text;
    });
}
document.addEventListener("toggle", function (event) {
  if (event.target.id === "troubleshooting-record" && event.target.open) {
    loadRecord(event.target).catch(function () {});
  }
}, true);
document.addEventListener("click", function (event) {
  var button = event.target.closest && event.target.closest("button.copy-record");
  if (!button) {
    return;
  }
  var status = button.parentElement.querySelector(".copy-status");
  var details = document.getElementById("troubleshooting-record");
  loadRecord(details)
    .then(function (text) {
      var box = details.querySelector("textarea");
      details.open = true;
      box.focus();
      box.select();
      var copied = navigator.clipboard && window.isSecureContext
        ? navigator.clipboard.writeText(text)
        : Promise.reject(new Error("no clipboard"));
      return copied.then(function () {
        status.textContent = button.getAttribute("data-copied");
      }, function () {
        status.textContent = button.getAttribute("data-selected");
      });
    })
    .catch(function () {
      window.location.href = details.getAttribute("data-record-url");
    });
});

// Background polling is marked as such: it does not keep an idle session alive
// (console/sessions.py), and a session that has ended sends the whole page to the login form.
document.addEventListener("htmx:configRequest", function (event) {
  if (event.detail.elt.hasAttribute("data-poll")) {
    event.detail.headers["X-Trainyard-Poll"] = "1";
  }
});
