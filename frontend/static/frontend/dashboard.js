// The support dashboard: polls the figures (frontend/dashboard/views.py) and draws them with Chart.js.
// No inline script (Content-Security-Policy): the page passes its data URL and refresh period as data attributes.
(function () {
  "use strict";

  const root = document.getElementById("dashboard");
  const rtl = document.documentElement.dir === "rtl";
  const lang = document.documentElement.lang || "en";
  const COLORS = ["#2450d8", "#d8582a", "#1e9e6a", "#8a3ffc", "#b3261e", "#a15c00", "#0f7a8a", "#5b6475"];
  const charts = {};

  // A label in its own direction: a Latin provider name inside Arabic text (or the reverse) keeps its order.
  // FIRST STRONG ISOLATE … POP DIRECTIONAL ISOLATE (Unicode bidi algorithm, UAX #9).
  function isolate(text) {
    return "\u2068" + text + "\u2069";
  }

  function timeLabels(labels, unit) {
    const options = unit === "minute" ? { hour: "2-digit", minute: "2-digit" } : { weekday: "short", hour: "2-digit", minute: "2-digit" };
    const format = new Intl.DateTimeFormat(lang, options);
    return labels.map((iso) => isolate(format.format(new Date(iso))));
  }

  function baseOptions(yTitle, yMax) {
    const direction = rtl ? "rtl" : "ltr";
    return {
      animation: false,
      responsive: true,
      maintainAspectRatio: false,
      locale: lang,
      interaction: { mode: "index", intersect: false },
      plugins: {
        legend: { position: "bottom", rtl: rtl, textDirection: direction },
        tooltip: { rtl: rtl, textDirection: direction },
      },
      scales: {
        x: { ticks: { maxRotation: 0, autoSkipPadding: 12 } },
        y: { beginAtZero: true, max: yMax, title: { display: Boolean(yTitle), text: yTitle } },
      },
    };
  }

  function datasets(series, type, scale) {
    return series.map((line, i) => ({
      label: isolate(line.name),
      data: line.values.map((v) => (v === null ? null : v * scale)),
      borderColor: COLORS[i % COLORS.length],
      backgroundColor: COLORS[i % COLORS.length] + (type === "bar" ? "cc" : "33"),
      borderWidth: type === "bar" ? 0 : 2,
      pointRadius: type === "bar" ? 0 : 2, // a lone minute between gaps is a dot, not nothing
      spanGaps: false,
    }));
  }

  function draw(id, type, labels, sets, options) {
    const existing = charts[id];
    if (existing) {
      existing.data.labels = labels;
      existing.data.datasets = sets;
      existing.update("none");
      return;
    }
    const canvas = document.getElementById("chart-" + id);
    charts[id] = new window.Chart(canvas, { type: type, data: { labels: labels, datasets: sets }, options: options });
  }

  function counted(options) {
    options.scales.y.ticks = { precision: 0 }; // whole notifications: no 0.2 steps
    return options;
  }

  function stacked(options) {
    options.scales.x.stacked = true;
    options.scales.y.stacked = true;
    return options;
  }

  function render(data) {
    const labels = timeLabels(data.labels, data.unit);
    const per = data.unit === "minute" ? "per minute" : "per hour";
    document.getElementById("unit-sent").textContent = per;
    document.getElementById("unit-dead").textContent = per;
    draw("sent", "line", labels, datasets(data.sent, "line", 1), counted(baseOptions("")));
    draw("latency", "line", labels, datasets(data.latency, "line", 1), baseOptions("ms"));
    draw("failures", "line", labels, datasets(data.failures, "line", 100), baseOptions("%", 100));
    draw("dead_letters", "bar", labels, datasets(data.dead_letters, "bar", 1), counted(stacked(baseOptions(""))));
    draw("queue", "line", labels, datasets(data.queue, "line", 1), counted(baseOptions("")));
    draw("cost", "bar", data.cost.labels.map(isolate), datasets(data.cost.series, "bar", 1), stacked(baseOptions("")));
    const providers = data.delivered.labels;
    const ratios = [{ name: "delivered", values: providers.map((p) => data.delivered.providers[p].ratio) }];
    draw("delivered", "bar", providers.map(isolate), datasets(ratios, "bar", 100), baseOptions("%", 100));
    summary(data);
  }

  // In HTML a <bdi> isolates a name the same way (canvas text has no elements, hence isolate()).
  function named(name, text) {
    const bdi = document.createElement("bdi");
    bdi.textContent = name;
    return [bdi, text];
  }

  function summary(data) {
    const queued = Object.entries(data.queued_now).flatMap(([tier, n], i) =>
      (i ? [" · "] : []).concat(named(tier, " " + n.toLocaleString(lang))),
    );
    document.getElementById("dash-queued").replaceChildren(...queued);
    document.getElementById("dash-dead").textContent = data.open_dead_letters.toLocaleString(lang);
    const list = document.getElementById("dash-breakers");
    list.replaceChildren(
      ...Object.entries(data.breakers).map(([provider, state]) => {
        const item = document.createElement("li");
        item.className = state;
        item.append(...named(provider, ": " + state));
        return item;
      }),
    );
    const status = document.getElementById("dash-status");
    status.parentElement.classList.remove("failed");
    status.textContent = "Updated " + new Date(data.generated_at).toLocaleTimeString(lang);
    root.dataset.drawn = data.generated_at;
  }

  async function refresh() {
    if (document.hidden && Object.keys(charts).length) return; // a tab nobody looks at costs no queries
    try {
      const response = await fetch(root.dataset.url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
      if (response.redirected) return window.location.reload(); // the session ended: the page asks to log in
      if (!response.ok) throw new Error("HTTP " + response.status);
      render(await response.json());
    } catch (error) {
      const status = document.getElementById("dash-status");
      status.parentElement.classList.add("failed");
      status.textContent = "Could not refresh (" + error.message + "); the charts show the last figures.";
    }
  }

  window.dashboardCharts = charts; // for the browser tests and for a curious agent's console
  refresh();
  window.setInterval(refresh, Number(root.dataset.refresh) * 1000);
})();
