// k2k's status page: polls api/status and renders it. The document's fields are described in
// docs/operations.md#status-page. Values go into the DOM as text, never as HTML.
(function () {
  "use strict";

  var POLL_MS = 2000;
  var CHARTS = [
    { key: "recordsPerSecond", id: "chart-records-per-second", label: "records/s", stroke: "#2a6fdb" },
    { key: "recordsBehind", id: "chart-records-behind", label: "records behind", stroke: "#d9822b" },
    { key: "recoveryPointSeconds", id: "chart-recovery-point-seconds", label: "recovery point (s)", stroke: "#c23030" },
  ];

  // For people and tests: the charts by key, the last document and the number of polls.
  var state = { charts: {}, last: null, polls: 0 };
  window.k2kStatus = state;

  function byId(id) {
    return document.getElementById(id);
  }

  function show(id, value, text) {
    var el = byId(id);
    el.dataset.value = value === null || value === undefined ? "" : String(value);
    el.textContent = text !== undefined ? text : value === null || value === undefined ? "–" : String(value);
  }

  function seconds(value) {
    return value === null || value === undefined ? "unknown" : Number(value).toFixed(1) + " s";
  }

  function when(epochSeconds) {
    return epochSeconds ? new Date(epochSeconds * 1000).toLocaleTimeString() : "–";
  }

  function cell(row, value, cls) {
    var td = document.createElement("td");
    td.textContent = value === null || value === undefined ? "–" : String(value);
    if (cls) {
      td.className = cls;
      td.dataset.value = value === null || value === undefined ? "" : String(value);
    }
    row.appendChild(td);
  }

  function fill(tableId, rows, build) {
    var body = byId(tableId).tBodies[0];
    body.textContent = "";
    rows.forEach(function (item) {
      var tr = document.createElement("tr");
      build(tr, item);
      body.appendChild(tr);
    });
  }

  function header(doc) {
    show("pipeline", doc.pipeline);
    document.title = "k2k " + (doc.pipeline || "status");
    var mode = doc.exactlyOnce === undefined ? "" : doc.exactlyOnce ? "exactly-once" : "at-least-once";
    show("mode", mode);
    show("source", doc.source);
    show("observed-at", doc.observedAt, when(doc.observedAt / 1000));
    var ready = doc.ready || { ready: false, reason: "unknown" };
    var badge = byId("ready");
    badge.dataset.ready = String(ready.ready);
    badge.textContent = ready.ready ? "ready" : "not ready";
    byId("ready-reason").textContent = ready.reason;
  }

  function totals(doc) {
    var t = doc.totals || {};
    var committed = (doc.partitions || []).reduce(function (sum, p) {
      return sum + (p.committed || 0);
    }, 0);
    show("records-behind", t.recordsBehind);
    show("max-lag-seconds", t.maxLagSeconds, seconds(t.maxLagSeconds));
    show("recovery-point-seconds", t.maxLagSeconds, seconds(t.maxLagSeconds));
    var rate = doc.rates ? doc.rates.recordsPerSecond : null;
    show("records-per-second", rate, rate === null || rate === undefined ? "–" : rate.toFixed(1));
    show("committed-total", committed);
    show("members-alive", t.membersAlive);
    show("partition-count", t.partitions);
  }

  function tables(doc) {
    fill("members", doc.members || [], function (tr, m) {
      tr.dataset.member = m.member;
      cell(tr, m.member, "member");
      cell(tr, m.state, "state");
      cell(tr, m.standby ? "yes" : "no");
      cell(tr, m.host, "host");
      cell(tr, m.ageSeconds === undefined ? null : m.ageSeconds.toFixed(1) + " s ago", "heartbeat");
    });
    fill("partitions", doc.partitions || [], function (tr, p) {
      tr.dataset.topic = p.topic;
      tr.dataset.partition = String(p.partition);
      cell(tr, p.topic, "topic");
      cell(tr, p.partition, "partition");
      cell(tr, p.owner ? p.owner.member + (p.owner.released ? " (released)" : "") : null, "owner");
      cell(tr, p.committed, "committed");
      cell(tr, p.end, "end");
      cell(tr, p.recordsBehind, "behind");
      cell(tr, p.lagSeconds, "lag-seconds");
    });
  }

  function errors(doc) {
    var list = byId("errors");
    var items = doc.errors || [];
    list.dataset.count = String(items.length);
    list.textContent = "";
    if (!items.length) {
      var none = document.createElement("li");
      none.className = "none";
      none.textContent = "none";
      list.appendChild(none);
      return;
    }
    items.slice().reverse().forEach(function (e) {
      var li = document.createElement("li");
      li.textContent = when(e.at) + "  " + e["class"] + ": " + e.message;
      list.appendChild(li);
    });
  }

  function chartSize(el) {
    return { width: Math.max(240, el.clientWidth), height: 160 };
  }

  function charts(doc) {
    var h = doc.history || { t: [] };
    CHARTS.forEach(function (c) {
      var el = byId(c.id);
      var data = [h.t || [], h[c.key] || []];
      var chart = state.charts[c.key];
      if (!chart) {
        var size = chartSize(el);
        chart = new uPlot(
          {
            width: size.width,
            height: size.height,
            legend: { show: false },
            scales: { x: { time: true } },
            series: [{}, { label: c.label, stroke: c.stroke, width: 2, spanGaps: false }],
          },
          data,
          el
        );
        state.charts[c.key] = chart;
      } else {
        chart.setData(data);
      }
      el.dataset.points = String(data[0].length);
    });
  }

  function render(doc) {
    state.last = doc;
    header(doc);
    totals(doc);
    tables(doc);
    errors(doc);
    charts(doc);
  }

  function failed(message) {
    var el = byId("fetch-error");
    el.hidden = !message;
    el.textContent = message ? " · " + message : "";
  }

  function poll() {
    fetch("api/status", { cache: "no-store" })
      .then(function (r) {
        if (!r.ok) {
          throw new Error("api/status answered " + r.status);
        }
        return r.json();
      })
      .then(function (doc) {
        render(doc);
        failed("");
      })
      .catch(function (e) {
        failed(String(e.message || e));
      })
      .then(function () {
        state.polls += 1;
        document.body.dataset.polls = String(state.polls);
        setTimeout(poll, POLL_MS);
      });
  }

  window.addEventListener("resize", function () {
    CHARTS.forEach(function (c) {
      var chart = state.charts[c.key];
      if (chart) {
        chart.setSize(chartSize(byId(c.id)));
      }
    });
  });

  poll();
})();
