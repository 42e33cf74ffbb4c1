// The Metrics tab (templates/jobs/metrics.html, issue 35): the workload's curves drawn with uPlot
// (static/vendor/uplot, MIT) from GET /api/v1/jobs/{id}/series, grouped by the metric's prefix.
// On every chart's axis: checkpoints (diamonds), Stalled / Unresponsive / Degraded spells (bands
// in the colours of those states elsewhere), restarts and new runs (lines with their labels).
// Drag to zoom (the zoomed range is asked again, so it refines), double-click to reset; a
// series is hidden by clicking its legend entry; hover shows the exact values in the legend;
// each chart has a table for reading without the chart. While a Job shown is live the page asks
// with its answer's cursor every few seconds (204: nothing new) and appends what came.
// The page sets #metrics[data-drawn] after each drawing and a figure's [data-zoomed] after a
// zoom's finer points arrived: what the browser tests wait for.
(function () {
  "use strict";
  var setupNode = document.getElementById("metrics-setup");
  var root = document.getElementById("metrics");
  if (!setupNode || !root || !window.uPlot) {
    return;
  }
  var setup = JSON.parse(setupNode.textContent);
  var words = setup.words;
  var apiAxis = setup.axis === "step" ? "step" : "time";
  var palette = ["#1457b8", "#b3261e", "#1b7f3b", "#8a5a00", "#6b3fa0", "#0f7c86", "#4a5361"];
  var spellLook = {
    Stalled: { tone: "--warn", icon: "\u2016" },
    Unresponsive: { tone: "--bad", icon: "\u26a0" },
    Degraded: { tone: "--warn", icon: "\u25d1" },
  };
  var answers = [];
  var charts = [];
  var pollTimer = null;

  function fill(text, values) {
    return text.replace(/\{(\w+)\}/g, function (whole, key) {
      return key in values ? String(values[key]) : whole;
    });
  }

  function cssColour(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || "#9a4d00";
  }

  // Rounded to 5 significant digits: for summaries (a chart's description) only.
  function number(value) {
    if (value === null || value === undefined) {
      return "\u2014";
    }
    return String(Number(value.toPrecision(5)));
  }

  // As reported: a step in full, a float with every digit it was sent with (the shortest text
  // that reads back as the same number). The legend (hover) and the tables show these.
  function exact(value) {
    if (value === null || value === undefined) {
      return "\u2014";
    }
    return String(value);
  }

  function duration(seconds) {
    var sign = seconds < 0 ? "-" : "";
    var left = Math.abs(Math.round(seconds));
    var hours = Math.floor(left / 3600);
    var minutes = Math.floor((left % 3600) / 60);
    if (hours) {
      return sign + hours + "h" + (minutes < 10 ? "0" : "") + minutes + "m";
    }
    return sign + (minutes ? minutes + "m" : (left % 60) + "s");
  }

  function clock(seconds) {
    return new Date(seconds * 1000).toLocaleString(document.documentElement.lang || undefined);
  }

  function xWords(value) {
    if (setup.axis === "time") {
      return clock(value);
    }
    return setup.axis === "since" ? duration(value) : exact(value);
  }

  // --- reading ----------------------------------------------------------------------------------

  function address(source, extra) {
    var params = new URLSearchParams({ x: apiAxis });
    if (source.run) {
      params.set("run", source.run);
    }
    Object.keys(extra || {}).forEach(function (key) {
      params.set(key, extra[key]);
    });
    return source.url + "?" + params.toString();
  }

  function ask(url) {
    return fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } }).then(
      function (response) {
        if (response.status === 204) {
          return { unchanged: true };
        }
        return response.ok ? response.json() : null;
      },
      function () {
        return null;
      }
    );
  }

  function load() {
    Promise.all(
      setup.sources.map(function (source) {
        return ask(address(source));
      })
    ).then(function (found) {
      answers = found;
      draw();
      markPainted();
      schedulePoll();
    });
  }

  // "metrics-painted": the first frame with the charts has been rendered. An animation frame's
  // callback runs before that frame's style, layout and paint; a task it queues runs after them.
  // bench/series.py times it from the series response (its resource timing's responseEnd).
  function markPainted() {
    if (performance.getEntriesByName("metrics-painted").length) {
      return;
    }
    window.requestAnimationFrame(function () {
      window.setTimeout(function () {
        performance.mark("metrics-painted");
      }, 0);
    });
  }

  // --- placing things on the x axis -------------------------------------------------------------

  function runStart(answer, run) {
    var found = (answer.runs || []).filter(function (item) {
      return item.run === run;
    })[0];
    return found ? found.started_at : 0;
  }

  function stepAt(answer, run, t) {
    var steps = (answer.series || []).filter(function (s) {
      return s.name === "step" && s.run === run;
    })[0];
    if (!steps || !steps.points.length) {
      return null;
    }
    var best = steps.points[0];
    steps.points.forEach(function (point) {
      if (point[0] <= t) {
        best = point;
      }
    });
    return best[1];
  }

  function xOfTime(answer, run, t) {
    if (setup.axis === "time") {
      return t;
    }
    return setup.axis === "since" ? t - runStart(answer, run) : stepAt(answer, run, t);
  }

  function xOfPoint(answer, run, point) {
    if (setup.axis === "step") {
      return point[1];
    }
    return setup.axis === "since" ? point[0] - runStart(answer, run) : point[0];
  }

  // --- what each chart draws ---------------------------------------------------------------------

  function groupOf(name) {
    if (name === "step" || name === "step_rate") {
      return words.progress;
    }
    var slash = name.indexOf("/");
    return slash > 0 ? name.slice(0, slash + 1) : words.other;
  }

  function seriesNames() {
    var names = [];
    answers.forEach(function (answer) {
      ((answer && answer.series) || []).forEach(function (series) {
        if (names.indexOf(series.name) === -1) {
          names.push(series.name);
        }
      });
    });
    var first = ["step", "step_rate"].filter(function (name) {
      return names.indexOf(name) !== -1;
    });
    var rest = names.filter(function (name) {
      return first.indexOf(name) === -1;
    });
    return first.concat(rest.sort());
  }

  function linesOf(name, sourceAnswers) {
    var lines = [];
    sourceAnswers.forEach(function (answer, index) {
      ((answer && answer.series) || []).forEach(function (series) {
        if (series.name !== name) {
          return;
        }
        var label = name === "step_rate" ? words.step_rate : name === "step" ? words.step : name;
        if (many()) {
          label = whose(index, series.run).slice(0, -2);
        }
        lines.push({ label: label, answer: answer, run: series.run, points: series.points });
      });
    });
    return lines;
  }

  function table(line) {
    var byX = {};
    line.points.forEach(function (point) {
      var x = xOfPoint(line.answer, line.run, point);
      if (x !== null && x !== undefined) {
        byX[x] = point[2];
      }
    });
    var xs = Object.keys(byX)
      .map(Number)
      .sort(function (a, b) {
        return a - b;
      });
    return [
      xs,
      xs.map(function (x) {
        return byX[x];
      }),
    ];
  }

  function joined(lines) {
    if (!lines.length) {
      return [[]];
    }
    return window.uPlot.join(lines.map(table));
  }

  function summary(line) {
    var values = line.points.map(function (point) {
      return point[2];
    });
    if (!values.length) {
      return line.label;
    }
    return (
      line.label +
      ": " +
      fill(words.points, {
        count: values.length,
        last: number(values[values.length - 1]),
        low: number(Math.min.apply(null, values)),
        high: number(Math.max.apply(null, values)),
      })
    );
  }

  // --- marks: spells, checkpoints, restarts, runs ------------------------------------------------

  // Several Jobs or runs on one chart: each line and each mark names its Job and run.
  function many() {
    return setup.sources.length > 1 || setup.sources[0].run === "all";
  }

  function whose(index, run) {
    if (!many()) {
      return "";
    }
    return setup.sources[index].name + " \u00b7 " + fill(words.run, { run: run }) + ": ";
  }

  function marks() {
    var found = [];
    answers.forEach(function (answer, index) {
      if (answer) {
        found = found.concat(marksOf(answer, index));
      }
    });
    return found;
  }

  function marksOf(answer, index) {
    var now = Date.now() / 1000;
    var found = [];
    (answer.spells || []).forEach(function (spell) {
      var look = spellLook[spell.state] || spellLook.Stalled;
      var text = whose(index, spell.run) + look.icon + " " + (words[spell.state] || spell.state);
      found.push({
        kind: "spell", answer: answer, run: spell.run, from: spell.from, to: spell.to || now,
        colour: cssColour(look.tone), text: text,
        words: text + ": " + clock(spell.from) + " \u2013 " +
          (spell.to ? clock(spell.to) : words.going_on),
      });
    });
    (answer.checkpoints || []).forEach(function (checkpoint) {
      found.push({
        kind: "checkpoint", answer: answer, run: checkpoint.run, from: checkpoint.t,
        text: "\u25c6", words: whose(index, checkpoint.run) + "\u25c6 " +
          fill(words.checkpoint, checkpoint) + " (" + clock(checkpoint.t) + ")",
      });
    });
    (answer.restarts || []).forEach(function (restart) {
      var text = whose(index, restart.run) + "\u21bb " +
        fill(words[restart.how] || words.restarted, restart);
      found.push({ kind: "line", answer: answer, run: restart.run, from: restart.t, text: text,
        words: text + " (" + clock(restart.t) + ")" });
    });
    (answer.runs || []).forEach(function (run, order) {
      if (order === 0 && setup.axis !== "time") {
        return;
      }
      var text = (many() ? setup.sources[index].name + ": " : "") + "\u25b6 " +
        fill(words.run_started, { run: run.run });
      found.push({ kind: "line", answer: answer, run: run.run, from: run.started_at, text: text,
        words: text + " (" + clock(run.started_at) + ")" });
    });
    return found;
  }

  // On the time axis, the axis reaches the end of a spell going on now in a live Job, so a run
  // that stopped reporting shows its Unresponsive band beyond its last point.
  function markedUntil() {
    if (setup.axis !== "time") {
      return -Infinity;
    }
    var ongoing = answers.some(function (answer, index) {
      return answer && setup.sources[index].live && (answer.spells || []).some(function (spell) {
        return spell.to === null;
      });
    });
    return ongoing ? Date.now() / 1000 : -Infinity;
  }

  // A label beside its line at `x`: to the right of it, or to the left where the right has no
  // room (near the plot's right edge, at 390 px), cut short with an ellipsis where neither side
  // has room for it whole; it never moves away from its line.
  function besideLine(ctx, box, text, x, gap, rows) {
    var right = box.left + box.width - (x + gap);
    var left = x - gap - box.left;
    var toLeft = ctx.measureText(text).width > right && left > right;
    var room = Math.max(0, toLeft ? left : right);
    var shown = text;
    while (shown.length > 1 && ctx.measureText(shown).width > room) {
      shown = shown.slice(0, -2) + "\u2026";
    }
    var width = ctx.measureText(shown).width;
    var start = toLeft ? x - gap - width : x + gap;
    ctx.fillText(shown, start, rows.free(start, start + width));
  }

  // Rows for the labels of one chart: a label goes on the first row where it overlaps no other
  // (marks close together, a run start and a restart at 390 px or the spells of runs compared,
  // do not write over each other); with every row taken, on the first.
  function labelRows(box, ratio) {
    var rows = [];
    var count = Math.max(1, Math.floor((box.height / ratio - 20) / 14));
    return {
      free: function (from, to) {
        for (var index = 0; index < count; index++) {
          var taken = rows[index] || (rows[index] = []);
          var clear = taken.every(function (span) {
            return to + 4 * ratio < span[0] || from > span[1] + 4 * ratio;
          });
          if (clear) {
            taken.push([from, to]);
            return box.top + (3 + 14 * index) * ratio;
          }
        }
        return box.top + 3 * ratio;
      },
    };
  }

  // A band's label starts inside the band, kept inside the plot.
  function inside(ctx, box, text, x) {
    return Math.max(box.left, Math.min(x, box.left + box.width - ctx.measureText(text).width - 2));
  }

  function drawMarks(u) {
    var ctx = u.ctx;
    var box = u.bbox;
    var ratio = window.devicePixelRatio || 1;
    ctx.save();
    ctx.font = 11 * ratio + "px system-ui, sans-serif";
    ctx.textBaseline = "top";
    ctx.textAlign = "left";
    var rows = labelRows(box, ratio);
    marks().forEach(function (mark) {
      var left = xOfTime(mark.answer, mark.run, mark.from);
      if (left === null || left === undefined) {
        return;
      }
      var x0 = u.valToPos(left, "x", true);
      if (mark.kind === "spell") {
        var x1 = u.valToPos(xOfTime(mark.answer, mark.run, mark.to), "x", true);
        var from = Math.max(box.left, x0);
        var to = Math.min(box.left + box.width, x1);
        if (to <= from) {
          return;
        }
        ctx.globalAlpha = 0.16;
        ctx.fillStyle = mark.colour;
        ctx.fillRect(from, box.top, to - from, box.height);
        ctx.globalAlpha = 1;
        ctx.fillStyle = mark.colour;
        var start = inside(ctx, box, mark.text, from + 3 * ratio);
        ctx.fillText(mark.text, start, rows.free(start, start + ctx.measureText(mark.text).width));
        return;
      }
      if (x0 < box.left || x0 > box.left + box.width) {
        return;
      }
      if (mark.kind === "checkpoint") {
        ctx.fillStyle = "#1b7f3b";
        ctx.fillText(mark.text, x0 - 4 * ratio, box.top + box.height - 14 * ratio);
        return;
      }
      ctx.strokeStyle = "#4a5361";
      ctx.lineWidth = ratio;
      ctx.setLineDash([4 * ratio, 3 * ratio]);
      ctx.beginPath();
      ctx.moveTo(x0, box.top);
      ctx.lineTo(x0, box.top + box.height);
      ctx.stroke();
      ctx.setLineDash([]);
      ctx.fillStyle = "#4a5361";
      besideLine(ctx, box, mark.text, x0, 3 * ratio, rows);
    });
    ctx.restore();
  }

  function eventList() {
    var found = marks();
    if (!found.length) {
      return null;
    }
    var details = document.createElement("details");
    details.className = "metrics-events";
    var title = document.createElement("summary");
    title.textContent = words.events + " (" + found.length + ")";
    details.appendChild(title);
    var list = document.createElement("ul");
    found
      .sort(function (a, b) {
        return a.from - b.from;
      })
      .forEach(function (mark) {
        var item = document.createElement("li");
        item.textContent = mark.words;
        list.appendChild(item);
      });
    details.appendChild(list);
    return details;
  }

  // --- one chart ---------------------------------------------------------------------------------

  function chartWidth(figure) {
    return Math.max(260, Math.floor(figure.clientWidth) - 2);
  }

  function options(name, lines, figure, width) {
    var series = [{ label: setup.axis === "step" ? words.step : words.time, value: function (u, v) {
      return v === null || v === undefined ? "\u2014" : xWords(v);
    } }];
    lines.forEach(function (line, index) {
      series.push({
        label: line.label,
        stroke: palette[index % palette.length],
        width: 1.5,
        spanGaps: true,
        value: function (u, v) {
          return exact(v);
        },
      });
    });
    var xAxis = { stroke: "#4a5361", grid: { stroke: "#e6e8eb" } };
    if (setup.axis === "since") {
      xAxis.values = function (u, splits) {
        return splits.map(duration);
      };
    }
    if (setup.axis === "time") {
      xAxis.space = 80;
      // uPlot gives the step between two ticks (seconds): the labels show what changes.
      xAxis.values = function (u, splits, axis, space, step) {
        var shape = { hour: "2-digit", minute: "2-digit" };
        if (u.scales.x.max - u.scales.x.min > 86400) {
          shape = { month: "numeric", day: "numeric", hour: "2-digit", minute: "2-digit" };
        } else if (step < 60) {
          shape = { hour: "2-digit", minute: "2-digit", second: "2-digit" };
        }
        return splits.map(function (seconds) {
          return new Date(seconds * 1000).toLocaleString(document.documentElement.lang, shape);
        });
      };
    }
    return {
      width: width,
      height: 200,
      scales: { x: { time: setup.axis === "time", range: function (u, min, max) {
        return [min, figure.chart && figure.chart.zoomed ? max : Math.max(max, markedUntil())];
      } } },
      axes: [xAxis, { stroke: "#4a5361", grid: { stroke: "#e6e8eb" }, size: 56 }],
      series: series,
      legend: { live: true },
      cursor: {
        drag: { x: true, y: false, setScale: false },
        bind: {
          dblclick: function () {
            return function () {
              reset(figure.chart);
              return null;
            };
          },
        },
      },
      hooks: { draw: [drawMarks], setSelect: [function (u) { zoomed(figure.chart, u); }] },
    };
  }

  // A chart's figure, in the page; its plot is made once every figure is in (makePlot).
  function makeFigure(name, container) {
    var lines = linesOf(name, answers);
    var figure = document.createElement("figure");
    figure.className = "metric-chart";
    figure.dataset.series = name;
    var caption = document.createElement("figcaption");
    var title = document.createElement("strong");
    title.textContent = name === "step" ? words.step : name === "step_rate" ? words.step_rate : name;
    caption.appendChild(title);
    var toggle = document.createElement("button");
    toggle.type = "button";
    toggle.className = "small table-toggle";
    toggle.textContent = words.table;
    toggle.setAttribute("aria-expanded", "false");
    caption.appendChild(toggle);
    figure.appendChild(caption);
    var plot = document.createElement("div");
    plot.setAttribute("role", "img");
    plot.setAttribute("aria-label", lines.map(summary).join("; "));
    plot.style.minHeight = "200px"; // the page's height, and so its scrollbar, before the plots
    figure.appendChild(plot);
    container.appendChild(figure);
    var chart = { name: name, lines: lines, figure: figure, zoomed: false, plot: null, table: null };
    figure.chart = chart;
    chart.holder = plot;
    toggle.addEventListener("click", function () {
      showTable(chart, toggle);
    });
    return chart;
  }

  function makePlot(chart, width) {
    var shape = options(chart.name, chart.lines, chart.figure, width);
    chart.plot = new window.uPlot(shape, joined(chart.lines), chart.holder);
  }

  function showTable(chart, toggle) {
    var open = toggle.getAttribute("aria-expanded") === "true";
    if (chart.table) {
      chart.table.remove();
      chart.table = null;
    }
    toggle.setAttribute("aria-expanded", open ? "false" : "true");
    toggle.textContent = open ? words.table : words.chart;
    if (open) {
      return;
    }
    var data = chart.plot.data;
    var wrap = document.createElement("div");
    wrap.className = "table-wrap metric-table";
    var tableNode = document.createElement("table");
    var head = tableNode.createTHead().insertRow();
    [setup.axis === "step" ? words.step : words.time].concat(chart.lines.map(function (line) {
      return line.label;
    })).forEach(function (text) {
      var cell = document.createElement("th");
      cell.scope = "col";
      cell.textContent = text;
      head.appendChild(cell);
    });
    var body = tableNode.createTBody();
    for (var row = 0; row < data[0].length; row++) {
      var tr = body.insertRow();
      tr.insertCell().textContent = xWords(data[0][row]);
      for (var column = 1; column < data.length; column++) {
        tr.insertCell().textContent = exact(data[column][row]);
      }
    }
    wrap.appendChild(tableNode);
    chart.figure.appendChild(wrap);
    chart.table = wrap;
  }

  // --- zoom ---------------------------------------------------------------------------------------

  function zoomed(chart, u) {
    if (!chart || u.select.width < 2) {
      return;
    }
    var low = u.posToVal(u.select.left, "x");
    var high = u.posToVal(u.select.left + u.select.width, "x");
    chart.zoomed = true;
    u.setScale("x", { min: low, max: high });
    u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
    chart.figure.removeAttribute("data-zoomed");
    if (setup.axis === "since") {
      chart.figure.dataset.zoomed = "scale";
      return; // runs that started at different times: the finer points are not asked for
    }
    Promise.all(
      setup.sources.map(function (source) {
        return ask(address(source, { names: chart.name, from: low, to: high }));
      })
    ).then(function (finer) {
      if (!chart.zoomed) {
        return;
      }
      chart.plot.setData(joined(linesOf(chart.name, finer)), false);
      chart.plot.setScale("x", { min: low, max: high });
      chart.figure.dataset.zoomed = String(chart.plot.data[0].length);
    });
  }

  function reset(chart) {
    if (!chart) {
      return;
    }
    chart.zoomed = false;
    chart.figure.removeAttribute("data-zoomed");
    chart.lines = linesOf(chart.name, answers);
    chart.plot.setData(joined(chart.lines));
  }

  // --- the page --------------------------------------------------------------------------------

  function draw() {
    charts.forEach(function (chart) {
      chart.plot.destroy();
    });
    charts = [];
    root.textContent = "";
    answers.forEach(function (answer, index) {
      if (answer === null) {
        var missing = document.createElement("p");
        missing.className = "notice warn";
        missing.textContent = setup.sources[index].name + ": " + words.not_found;
        root.appendChild(missing);
      }
    });
    var names = seriesNames();
    if (!names.length) {
      var empty = document.createElement("p");
      empty.className = "muted";
      empty.textContent = words.no_data;
      root.appendChild(empty);
      root.dataset.drawn = "0";
      return;
    }
    var hint = document.getElementById("metrics-hint");
    if (hint) {
      hint.textContent = words.zoom_hint;
    }
    var events = eventList();
    if (events) {
      root.appendChild(events);
    }
    var groups = {};
    names.forEach(function (name) {
      var group = groupOf(name);
      if (!groups[group]) {
        var section = document.createElement("section");
        section.className = "metric-group";
        var heading = document.createElement("h2");
        heading.textContent = group;
        section.appendChild(heading);
        groups[group] = document.createElement("div");
        groups[group].className = "metric-grid";
        section.appendChild(groups[group]);
        root.appendChild(section);
      }
      charts.push(makeFigure(name, groups[group]));
    });
    // Every figure is laid out before any plot is made: the widths are read in one layout, and
    // no chart is drawn at the full row's width before the next one shares its row.
    var widths = charts.map(function (chart) {
      return chartWidth(chart.figure);
    });
    charts.forEach(function (chart, index) {
      makePlot(chart, widths[index]);
    });
    resize();
    root.dataset.drawn = String(charts.length);
  }

  function resize() {
    charts.forEach(function (chart) {
      var width = chartWidth(chart.figure);
      if (width !== chart.plot.width) {
        chart.plot.setSize({ width: width, height: 200 });
      }
    });
  }

  // --- live: append what is new -------------------------------------------------------------------

  function schedulePoll() {
    var live = setup.sources.some(function (source) {
      return source.live;
    });
    if (!live || pollTimer !== null) {
      return;
    }
    pollTimer = window.setInterval(poll, setup.poll_seconds * 1000);
  }

  // Each live Job shown (this one and those compared) is asked for what came since its cursor.
  function poll() {
    if (document.visibilityState !== "visible") {
      return;
    }
    setup.sources.forEach(function (source, index) {
      var current = answers[index];
      if (!source.live || !current) {
        return;
      }
      ask(address(source, { after: current.cursor })).then(function (newer) {
        if (!newer || newer.unchanged || answers[index] !== current) {
          return;
        }
        if (newer.cursor.split(".")[0] !== current.cursor.split(".")[0]) {
          load(); // a new run began: everything is asked again
          return;
        }
        if (!append(current, newer)) {
          draw();
          return;
        }
        charts.forEach(function (chart) {
          if (!chart.zoomed) {
            chart.lines = linesOf(chart.name, answers);
            chart.plot.setData(joined(chart.lines));
          }
        });
        root.dataset.appended = current.cursor;
      });
    });
  }

  // Adds the newer answer's points to the kept one; false when a series is new (draw again).
  // A series that grew past twice the points of an answer is thinned back to them (`thinned`),
  // so a tab left open on a live run keeps a bounded chart.
  function append(kept, newer) {
    var complete = true;
    newer.series.forEach(function (series) {
      var same = kept.series.filter(function (old) {
        return old.name === series.name && old.run === series.run;
      })[0];
      if (!same) {
        kept.series.push(series);
        complete = false;
        return;
      }
      var last = same.points.length ? same.points[same.points.length - 1][0] : -Infinity;
      series.points.forEach(function (point) {
        if (point[0] > last) {
          same.points.push(point);
        }
      });
      if (same.points.length > 2 * setup.points) {
        same.points = thinned(same.points, setup.points);
      }
    });
    ["checkpoints", "spells", "runs", "restarts", "cursor"].forEach(function (key) {
      kept[key] = newer[key];
    });
    return complete;
  }

  // At most `limit` of the points, in their order: each of `limit / 2` runs of equal count keeps
  // its lowest and its highest point (as the server's downsampling does per bucket), so a spike
  // or a dip stays.
  function thinned(points, limit) {
    var buckets = Math.max(1, Math.floor(limit / 2));
    var kept = [];
    for (var bucket = 0; bucket < buckets; bucket++) {
      var begin = Math.floor((bucket * points.length) / buckets);
      var end = Math.floor(((bucket + 1) * points.length) / buckets);
      var low = begin;
      var high = begin;
      for (var k = begin; k < end; k++) {
        low = points[k][2] < points[low][2] ? k : low;
        high = points[k][2] > points[high][2] ? k : high;
      }
      if (end > begin) {
        kept.push(points[Math.min(low, high)]);
        if (low !== high) {
          kept.push(points[Math.max(low, high)]);
        }
      }
    }
    return kept;
  }

  var resizeTimer = null;
  window.addEventListener("resize", function () {
    window.clearTimeout(resizeTimer);
    resizeTimer = window.setTimeout(resize, 150);
  });
  load();
})();
