// The session page's token chart: one point per turn, the threshold lines
// and a mark per compaction. It reads its data from the #chart element's
// data-chart attribute (the page is rendered on the server; no request).
(function () {
  "use strict";
  function draw() {
    var el = document.getElementById("chart");
    if (!el || typeof uPlot === "undefined") return;
    var d = JSON.parse(el.getAttribute("data-chart"));
    if (!d.seq.length) {
      el.textContent = "No turns applied yet.";
      return;
    }
    var n = d.seq.length;
    function flat(v) { var a = new Array(n); for (var i = 0; i < n; i++) a[i] = v; return a; }
    var marks = new Array(n).fill(null);
    var bySeq = {};
    d.marks.forEach(function (m) { bySeq[m.seq] = m; });
    for (var i = 0; i < n; i++) if (bySeq[d.seq[i]]) marks[i] = bySeq[d.seq[i]].pre;
    var markLines = {
      hooks: {
        draw: [function (u) {
          var ctx = u.ctx;
          ctx.save();
          ctx.strokeStyle = "#7a1fa2";
          ctx.fillStyle = "#4a0f63";
          ctx.lineWidth = 2 * devicePixelRatio;
          ctx.font = (12 * devicePixelRatio) + "px sans-serif";
          d.marks.forEach(function (m) {
            var x = u.valToPos(m.seq, "x", true);
            ctx.setLineDash([]);
            ctx.beginPath();
            ctx.moveTo(x, u.bbox.top);
            ctx.lineTo(x, u.bbox.top + u.bbox.height);
            ctx.stroke();
            ctx.fillText(m.method + " " + m.pre + "→" + m.post, x + 4 * devicePixelRatio, u.bbox.top + 14 * devicePixelRatio);
          });
          ctx.restore();
        }]
      }
    };
    var width = Math.max(320, Math.min(el.clientWidth || 900, 1100));
    new uPlot({
      width: width,
      height: 320,
      plugins: [markLines],
      scales: { x: { time: false } },
      axes: [{ label: "turn (seq)", incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000] }, { label: "tokens", size: 70 }],
      series: [
        { label: "seq" },
        { label: "tokens", stroke: "#1f5fbf", width: 2, points: { show: n <= 200 } },
        { label: "warning", stroke: "#b26b00", dash: [6, 4], points: { show: false } },
        { label: "auto-compact", stroke: "#c0392b", dash: [6, 4], points: { show: false } },
        { label: "blocking", stroke: "#000000", dash: [2, 3], points: { show: false } },
        { label: "compaction", stroke: "#7a1fa2", width: 0, points: { show: true, size: 10, fill: "#7a1fa2" } }
      ]
    }, [d.seq, d.tokens, flat(d.warning), flat(d.autocompact), flat(d.blocking), marks], el);
    el.setAttribute("data-drawn", String(d.marks.length));
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", draw);
  else draw();
})();
