// sagemem ui: a thin page over the local API. Plain JavaScript, no build step, nothing
// loaded from elsewhere. All text from memories goes into the page as text, never as HTML.
"use strict";

const ZH = (navigator.language || "").toLowerCase().startsWith("zh");
const TEXT = {
  memories: ["Memories", "记忆"], candidates: ["Archive candidates", "归档候选"], health: ["Health", "健康检查"],
  snapshots: ["Snapshots", "快照"], conflicts: ["Conflicts", "冲突"], stars: ["Star map", "星图"],
  problems: ["{n} health problems", "{n} 个健康问题"], problem: ["1 health problem", "1 个健康问题"],
  nconflicts: ["{n} conflicts", "{n} 个冲突"], nconflict: ["1 conflict", "1 个冲突"],
  confirmCandidate: ["Archive 1 memory? A snapshot is taken first.", "归档 1 条记忆？会先创建快照。"],
  search: ["Search memories…", "搜索记忆…"], archivedToo: ["show archived", "显示已归档"], newMemory: ["New memory", "新建记忆"],
  edit: ["Edit", "编辑"], save: ["Save", "保存"], cancel: ["Cancel", "取消"], archive: ["Archive", "归档"],
  restore: ["Restore", "恢复"], lock: ["Lock", "锁定"], unlock: ["Unlock", "解锁"], back: ["Back to the list", "返回列表"],
  raw: ["The file as it is", "原始文件"], locked: ["locked", "已锁定"], archivedBecause: ["archived: {r}", "已归档：{r}"],
  saved: ["Saved.", "已保存。"], conflictTitle: ["The file changed on disk since this page loaded. Nothing was overwritten; your text is kept as conflict {id}.",
    "此页面打开后文件已在磁盘上被修改。没有覆盖任何内容；你的版本已保存为冲突 {id}。"],
  onDisk: ["On disk now", "磁盘上的当前版本"], yours: ["Your text", "你的版本"], keepMine: ["Save mine over it", "用我的版本覆盖"],
  keepTheirs: ["Keep the file on disk", "保留磁盘上的版本"], keptDisk: ["The file on disk was kept.", "已保留磁盘上的版本。"],
  diskThen: ["On disk when the write was refused", "写入被拒绝时磁盘上的版本"], troubles: ["Some state could not be read: {t}", "部分状态无法读取：{t}"], reason: ["Reason (optional)", "原因（可选）"],
  confirmArchive: ["Archive {f}? It moves to archive/ and can be restored.", "归档 {f}？文件会移到 archive/，可以恢复。"],
  noCandidates: ["No memory is idle past its type's threshold.", "没有超过闲置阈值的记忆。"],
  archiveChosen: ["Archive the chosen ones", "归档所选"], discard: ["Leave without saving your edit?", "不保存修改就离开吗？"], chooseAll: ["Choose all", "全选"], confirmCandidates: ["Archive {n} memories? A snapshot is taken first.", "归档 {n} 条记忆？会先创建快照。"],
  healthy: ["No problems.", "没有问题。"], fix: ["Fix the safe problems (CRLF, index lines)", "修复安全的问题（CRLF、索引行）"],
  confirmFix: ["A snapshot is taken first, then CRLF and index lines are fixed. Go on?", "会先创建快照，再修复 CRLF 和索引行。继续？"],
  rollback: ["Roll back", "回滚"], confirmRollback: ["Roll back to snapshot {id} ({parts})? The present is snapshotted first; nothing is deleted.",
    "回滚到快照 {id}（{parts}）？会先为当前状态创建快照；不会删除任何文件。"], noSnapshots: ["No snapshots yet.", "还没有快照。"],
  kind_duplicate: ["A new memory was given the name of one that exists. Keep the existing one (save the new text under another name first to keep both), or replace it with the new text.",
    "新建的记忆与已有记忆同名。可以保留已有的记忆（想两者都留，先把新内容用别的名字保存），或用新内容替换它。"],
  kind_changed: ["The file changed before this write landed. Compare the two, then keep one.", "写入之前文件已被修改。对比两个版本，然后保留其一。"],
  kind_deleted: ["The file was deleted before this write landed. Write it back, or leave it deleted.", "写入之前文件已被删除。可以写回，或保持删除。"],
  kind_unapplied: ["The change could not be applied to the file, so there is nothing to write: close this, then make the change again.", "修改无法应用到文件上，没有可写入的内容：关闭此冲突后重新修改。"],
  keepExisting: ["Keep the existing memory", "保留已有的记忆"], replaceExisting: ["Replace it with the new text", "用新内容替换"],
  writeBack: ["Write it back", "写回"], leaveDeleted: ["Leave it deleted", "保持删除"], close: ["Close", "关闭"],
  noConflicts: ["No open conflicts.", "没有未解决的冲突。"], keepDisk: ["Keep the disk version", "保留磁盘版本"], keepProposed: ["Use the refused write", "采用被拒绝的写入"],
  type: ["Type", "类型"], name: ["Name", "名称"], description: ["Description", "描述"], tags: ["Tags (comma separated)", "标签（逗号分隔）"],
  body: ["Text", "正文"], create: ["Create", "创建"], allTypes: ["all types", "全部类型"], idle: ["idle {d} days", "闲置 {d} 天"],
  timeline: ["Memories by last update", "按最后更新时间"], broken: ["Files that are not memories", "不是记忆的文件"],
  scope: ["Scope", "范围"], allScopes: ["all scopes", "全部范围"],
  byType: ["by type, as sagemem new does", "按类型（同 sagemem new）"],
  dream: ["Dream", "整理"], noDreams: ["No dream runs yet: `sagemem dream` starts one (report mode changes nothing).", "还没有整理记录：运行 `sagemem dream` 开始一次（只出报告的模式不会改动任何东西）。"],
  report: ["Report", "报告"], applyProposals: ["Apply the proposals", "应用建议"],
  confirmApply: ["Carry out the {n} proposals of run {id}? A snapshot is taken first; a memory edited since is left alone.", "执行整理 {id} 的 {n} 条建议？会先创建快照；之后被改过的记忆不会被覆盖。"],
  confirmDreamRollback: ["Undo dream run {id} ({parts})? The present is snapshotted first; nothing is deleted.", "撤销整理 {id}（{parts}）？会先为当前状态创建快照；不会删除任何文件。"],
  run: ["Run", "记录"], started: ["Started", "开始时间"], modeStatus: ["Mode · status", "模式 · 状态"],
  changesProposals: ["Changes / proposals", "改动 / 建议"], model: ["Model", "模型"], actions: ["Actions", "操作"],
};
const t = (key, vars = {}) => (TEXT[key] ? TEXT[key][ZH ? 1 : 0] : key).replace(/\{(\w+)\}/g, (_, k) => String(vars[k]));
const COLORS = { user: "var(--user)", feedback: "var(--feedback)", project: "var(--project)", reference: "var(--reference)" };
const RGB = { user: "208,138,46", feedback: "61,154,106", project: "47,111,176", reference: "138,95,184" };

// The URL `sagemem ui` printed carries the token; every API call sends it in a header.
const TOKEN = new URLSearchParams(location.search).get("token") || "";

const state = { data: null, tab: "memories", scope: "", type: "", tags: new Set(), query: "", hits: null, archived: false };

function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "style") node.style.cssText = value; // CSSOM: allowed by the page's CSP
    else if (value === true) node.setAttribute(key, "");
    else if (value !== false && value != null) node.setAttribute(key, value);
  }
  for (const child of children.flat()) if (child != null) node.append(child instanceof Node ? child : String(child));
  return node;
}

async function api(path, body) {
  const options = { headers: { "X-Sagemem-Token": TOKEN } };
  if (body !== undefined) Object.assign(options, { method: "POST", body: JSON.stringify(body) });
  options.headers["Content-Type"] = "application/json";
  const response = await fetch(path, options);
  const data = await response.json().catch(() => ({}));
  if (!response.ok) { const error = new Error(data.error || response.statusText); error.status = response.status; error.data = data; throw error; }
  return data;
}

function say(text, error = false) {
  const box = document.getElementById("message");
  box.textContent = text; box.className = error ? "error" : "";
}

async function load() {
  state.data = await api("/api/overview");
  // With several scopes each memory is named `scope:file`; the header says where each scope is.
  document.getElementById("where").textContent = state.data.named
    ? state.data.scopes.map((s) => `${s.name}: ${s.memory_dir}`).join("  ·  ") : state.data.memory_dir;
  if (!state.data.scopes.some((s) => s.name === state.scope)) state.scope = "";
  const problems = document.getElementById("badge-problems");
  problems.textContent = t(state.data.problems === 1 ? "problem" : "problems", { n: state.data.problems });
  problems.classList.toggle("bad", state.data.problems > 0);
  const conflicts = document.getElementById("badge-conflicts");
  conflicts.textContent = t(state.data.conflicts === 1 ? "nconflict" : "nconflicts", { n: state.data.conflicts });
  conflicts.classList.toggle("bad", state.data.conflicts > 0);
  if (state.data.troubles.length) say(t("troubles", { t: state.data.troubles.join("; ") }), true);
}

function show(tab) {
  const editor = document.getElementById("editor");
  if (editor && editor.value !== editor.dataset.loaded && !confirm(t("discard"))) return;
  state.tab = tab;
  for (const button of document.querySelectorAll("#tabs button")) button.setAttribute("aria-selected", String(button.dataset.tab === tab));
  const main = document.getElementById("main");
  main.replaceChildren();
  ({ memories: listPage, candidates: candidatesPage, health: healthPage, snapshots: snapshotsPage,
     conflicts: conflictsPage, dream: dreamPage, stars: starsPage })[tab](main);
}

function dot(type) { return h("span", { class: "type", style: `background:${COLORS[type] || "var(--other)"}`, "aria-hidden": "true" }); }

function visible() {
  let items = state.data.memories.filter((m) => state.archived || !m.archived);
  if (state.scope) items = items.filter((m) => m.scope === state.scope);
  if (state.type) items = items.filter((m) => m.type === state.type);
  for (const tag of state.tags) items = items.filter((m) => m.tags.some((x) => x.toLowerCase() === tag.toLowerCase()));
  if (state.hits) { const rank = new Map(state.hits.map((f, i) => [f, i])); items = items.filter((m) => rank.has(m.file)).sort((a, b) => rank.get(a.file) - rank.get(b.file)); }
  return items;
}

function listPage(main) {
  const search = h("input", { type: "search", placeholder: t("search"), value: state.query, "aria-label": t("search") });
  let timer = null;
  search.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(async () => {
      const query = search.value.trim();
      const asked = (listPage.asked = (listPage.asked || 0) + 1);
      try {
        const hits = query ? (await api(`/api/search?q=${encodeURIComponent(query)}`)).files : null;
        if (asked !== listPage.asked) return; // a newer search is on its way
        state.query = query; state.hits = hits; drawItems();
      } catch (e) { say(e.message, true); }
    }, 250);
  });
  const archived = h("input", { type: "checkbox", id: "show-archived", checked: state.archived, onchange: (e) => { state.archived = e.target.checked; drawItems(); } });
  main.append(h("div", { class: "toolbar" }, search, h("label", { for: "show-archived" }, archived, " ", t("archivedToo")),
    h("button", { class: "primary", type: "button", onclick: () => createPage(main) }, t("newMemory"))));
  const scopeChips = !state.data.named ? null : h("div", { class: "chips", id: "scope-chips", "aria-label": t("scope") },
    h("button", { class: "chip", type: "button", "aria-pressed": String(!state.scope), onclick: () => { state.scope = ""; show("memories"); } }, t("allScopes")),
    state.data.scopes.map((s) => h("button", { class: "chip", type: "button", "data-scope": s.name, "aria-pressed": String(state.scope === s.name),
      title: s.memory_dir, onclick: () => { state.scope = state.scope === s.name ? "" : s.name; show("memories"); } }, `${s.name} ${s.memories}`)));
  const typeChips = h("div", { class: "chips", "aria-label": t("type") },
    h("button", { class: "chip", type: "button", "aria-pressed": String(!state.type), onclick: () => { state.type = ""; show("memories"); } }, t("allTypes")),
    Object.entries(state.data.types).map(([type, n]) => h("button", { class: "chip", type: "button", "aria-pressed": String(state.type === type),
      onclick: () => { state.type = state.type === type ? "" : type; show("memories"); } }, dot(type), `${type} ${n}`)));
  const tagChips = h("div", { class: "chips", "aria-label": "tags" }, Object.entries(state.data.tags).map(([tag, n]) =>
    h("button", { class: "chip", type: "button", "data-tag": tag, "aria-pressed": String(state.tags.has(tag)),
      onclick: () => { state.tags.has(tag) ? state.tags.delete(tag) : state.tags.add(tag); show("memories"); } }, `#${tag} ${n}`)));
  const list = h("ul", { class: "list", id: "memory-list" });
  main.append(...[scopeChips, typeChips, tagChips, list].filter(Boolean));
  if (state.data.broken.length) {
    main.append(h("h2", {}, t("broken")), h("ul", {}, state.data.broken.map((b) => h("li", {}, h("span", { class: "file" }, b.file), " — ", b.rule))));
  }
  function drawItems() {
    list.replaceChildren(...visible().map((m) => {
      const item = h("li", { tabindex: "0", class: m.archived ? "archived" : "", "data-file": m.file },
        dot(m.type), h("strong", {}, m.name), " ", h("span", { class: "file" }, m.file),
        m.locked ? h("span", { class: "muted" }, ` · ${t("locked")}`) : null,
        h("div", { class: "muted" }, m.description || ""),
        m.archived ? h("div", { class: "muted" }, t("archivedBecause", { r: m.archived_reason || "—" })) : null);
      const open = () => viewPage(main, m);
      item.addEventListener("click", open);
      item.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); open(); } });
      return item;
    }));
  }
  drawItems();
}

// A small Markdown renderer working on escaped text: headings, fences, lists, emphasis, code,
// and links to http(s) only.
function markdown(text) {
  const escape = (s) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
  const inline = (s) => escape(s)
    .replace(/`([^`]+)`/g, "<code>$1</code>")
    .replace(/\*\*([^*]+)\*\*/g, "<strong>$1</strong>")
    .replace(/\*([^*]+)\*/g, "<em>$1</em>")
    .replace(/\[([^\]]+)\]\((https?:\/\/[^)\s]+)\)/g, '<a href="$2" rel="noopener noreferrer" target="_blank">$1</a>');
  const out = []; let fence = null; let list = false;
  for (const line of text.split("\n")) {
    if (/^\s*(```|~~~)/.test(line)) {
      if (fence === null) { fence = []; } else { out.push(`<pre><code>${escape(fence.join("\n"))}</code></pre>`); fence = null; }
      continue;
    }
    if (fence !== null) { fence.push(line); continue; }
    const item = line.match(/^\s*[-*] (.*)$/);
    if (item) { if (!list) { out.push("<ul>"); list = true; } out.push(`<li>${inline(item[1])}</li>`); continue; }
    if (list) { out.push("</ul>"); list = false; }
    const heading = line.match(/^(#{1,6})\s+(.*)$/);
    if (heading) out.push(`<h${heading[1].length + 2 > 6 ? 6 : heading[1].length + 2}>${inline(heading[2])}</h${heading[1].length + 2 > 6 ? 6 : heading[1].length + 2}>`);
    else if (line.trim()) out.push(`<p>${inline(line)}</p>`);
  }
  if (fence !== null) out.push(`<pre><code>${escape(fence.join("\n"))}</code></pre>`);
  if (list) out.push("</ul>");
  return out.join("\n");
}

function splitFrontmatter(text) {
  const match = text.match(/^---\r?\n[\s\S]*?\r?\n---\r?\n?/);
  return match ? text.slice(match[0].length) : text;
}

async function viewPage(main, m) {
  const memory = await api(`/api/memory?file=${encodeURIComponent(m.file)}${m.archived ? "&archived=1" : ""}`);
  main.replaceChildren();
  const rendered = h("div", { class: "rendered" }); rendered.innerHTML = markdown(splitFrontmatter(memory.text));
  const act = async (path, body, done) => { try { await api(path, body); say(done); await load(); const fresh = state.data.memories.find((x) => x.file === m.file); fresh ? viewPage(main, fresh) : show("memories"); } catch (e) { say(e.message, true); } };
  const actions = h("div", { class: "actions" },
    h("button", { type: "button", onclick: () => show("memories") }, t("back")),
    m.archived ? null : h("button", { type: "button", id: "edit", onclick: () => editPage(main, m, memory) }, t("edit")),
    m.archived
      ? h("button", { type: "button", id: "restore", onclick: () => act("/api/restore", { file: m.file }, t("restore")) }, t("restore"))
      : h("button", { type: "button", id: "archive", class: "danger", onclick: () => { if (confirm(t("confirmArchive", { f: m.file }))) act("/api/archive", { file: m.file }, t("archive")); } }, t("archive")),
    m.archived ? null : h("button", { type: "button", id: "lock", onclick: () => act(m.locked ? "/api/unlock" : "/api/lock", { file: m.file }, m.locked ? t("unlock") : t("lock")) }, m.locked ? t("unlock") : t("lock")));
  main.append(h("h2", {}, dot(m.type), m.name, " ", h("span", { class: "file" }, m.file)), actions, rendered,
    h("h3", {}, t("raw")), h("pre", { class: "raw", id: "raw" }, memory.text));
}

function editPage(main, m, memory) {
  main.replaceChildren();
  const area = h("textarea", { id: "editor", "aria-label": m.file }); area.value = memory.text;
  area.dataset.loaded = memory.text;
  const save = async (text, version) => {
    try {
      await api("/api/save", { file: m.file, text, expected_version: version });
      say(t("saved")); await load(); viewPage(main, state.data.memories.find((x) => x.file === m.file) || m);
    } catch (e) {
      if (e.status !== 409) { say(e.message, true); return; }
      await load(); // the header counts the new conflict
      conflictPage(main, m, text, e.data);
    }
  };
  main.append(h("h2", {}, t("edit"), " ", h("span", { class: "file" }, m.file)), area,
    h("div", { class: "actions" }, h("button", { class: "primary", type: "button", id: "save", onclick: () => save(area.value, memory.version) }, t("save")),
      h("button", { type: "button", onclick: () => viewPage(main, m) }, t("cancel"))));
  area.focus();
  editPage.save = save;
}

function conflictPage(main, m, mine, data) {
  main.replaceChildren();
  say(t("conflictTitle", { id: data.conflict_id }), true);
  main.append(h("h2", {}, m.file), h("div", { class: "compare", id: "compare" },
    h("div", {}, h("h3", {}, t("onDisk")), h("pre", { class: "raw", id: "theirs" }, data.theirs ?? "")),
    h("div", {}, h("h3", {}, t("yours")), h("pre", { class: "raw", id: "mine" }, mine))),
    h("div", { class: "actions" },
      h("button", { type: "button", id: "keep-mine", onclick: () => settle("proposed") }, t("keepMine")),
      h("button", { type: "button", id: "keep-theirs", onclick: () => settle("disk") }, t("keepTheirs"))));
  // Either choice resolves the recorded conflict (itself a guarded write), so none stays open.
  async function settle(keep) {
    try {
      await api("/api/conflicts/resolve", { id: data.conflict_id, keep });
      say(keep === "proposed" ? t("saved") : t("keptDisk")); await load();
      viewPage(main, state.data.memories.find((x) => x.file === m.file) || m);
    } catch (e) { say(e.message, true); }
  }
}

function createPage(main) {
  main.replaceChildren();
  const field = (id, label, node) => [h("label", { for: id }, label), node];
  const type = h("select", { id: "new-type" }, ["user", "feedback", "project", "reference"].map((x) => h("option", { value: x }, x)));
  const name = h("input", { type: "text", id: "new-name" });
  const description = h("input", { type: "text", id: "new-description" });
  const tags = h("input", { type: "text", id: "new-tags" });
  const body = h("textarea", { id: "new-body" });
  // With several scopes the person may choose one; left alone, the type decides, as `sagemem new` does.
  const scope = h("select", { id: "new-scope" }, h("option", { value: "" }, t("byType")),
    state.data.scopes.map((s) => h("option", { value: s.name, selected: s.name === state.scope }, s.name)));
  // Each field is a label and its control: spread, as `append` would put an array in as text.
  main.append(...[h("h2", {}, t("newMemory")), state.data.named ? field("new-scope", t("scope"), scope) : [],
    field("new-type", t("type"), type), field("new-name", t("name"), name),
    field("new-description", t("description"), description), field("new-tags", t("tags"), tags), field("new-body", t("body"), body),
    h("div", { class: "actions" }, h("button", { class: "primary", type: "button", id: "create", onclick: async () => {
      try {
        const made = await api("/api/create", { type: type.value, name: name.value, description: description.value, body: body.value,
          tags: tags.value.split(",").map((x) => x.trim()).filter(Boolean), scope: state.data.named ? scope.value : "" });
        say(made.file); await load(); viewPage(main, state.data.memories.find((x) => x.file === made.file));
      } catch (e) {
        if (e.status === 409) await load(); // a name taken: kept as a conflict, which the header counts
        say(e.message, true);
      }
    } }, t("create")), h("button", { type: "button", onclick: () => show("memories") }, t("cancel")))].flat());
}

async function candidatesPage(main) {
  const { candidates } = await api("/api/candidates");
  if (!candidates.length) { main.append(h("p", {}, t("noCandidates"))); return; }
  // Nothing is chosen until the person chooses: one by one, or all at once.
  const boxes = candidates.map((c) => h("input", { type: "checkbox", value: c.file, "aria-label": c.file }));
  main.append(h("table", {}, h("tbody", {}, candidates.map((c, i) => h("tr", {}, h("td", {}, boxes[i]), h("td", { class: "file" }, c.file),
    h("td", {}, c.reason))))),
    h("div", { class: "actions" }, h("button", { type: "button", id: "choose-all", onclick: () => boxes.forEach((b) => { b.checked = true; }) }, t("chooseAll")),
      h("button", { class: "danger", type: "button", id: "archive-candidates", onclick: async () => {
      const files = boxes.filter((b) => b.checked).map((b) => b.value);
      if (!files.length || !confirm(t(files.length === 1 ? "confirmCandidate" : "confirmCandidates", { n: files.length }))) return;
      try { const done = await api("/api/candidates/apply", { files }); say(`${done.archived.length} ✓ · snapshot ${done.snapshots.join(", ") || "—"}${done.refused.length ? " · " + done.refused.map((r) => `${r.file}: ${r.error}`).join("; ") : ""}`); await load(); show("candidates"); }
      catch (e) { say(e.message, true); }
    } }, t("archiveChosen"))));
}

async function healthPage(main) {
  const report = await api("/api/health");
  if (!report.findings.length) main.append(h("p", {}, t("healthy")));
  const groups = {};
  for (const f of report.findings) (groups[f.check] = groups[f.check] || []).push(f);
  for (const [check, findings] of Object.entries(groups)) {
    main.append(h("h3", {}, check), h("ul", {}, findings.map((f) => {
      const known = state.data.memories.find((m) => m.file === f.file);
      const name = known ? h("a", { href: "#", onclick: (e) => { e.preventDefault(); show("memories"); viewPage(document.getElementById("main"), known); } }, f.file) : h("span", { class: "file" }, f.file);
      return h("li", { class: f.severity === "hint" ? "muted" : "" }, name, f.line ? `:${f.line}` : "", " — ", f.message);
    })));
  }
  main.append(h("div", { class: "actions" }, h("button", { type: "button", id: "fix", onclick: async () => {
    if (!confirm(t("confirmFix"))) return;
    try { const done = await api("/api/fix", {}); say(done.changes.join(" · ") || t("healthy")); await load(); show("health"); } catch (e) { say(e.message, true); }
  } }, t("fix"))));
}

async function snapshotsPage(main) {
  const { snapshots } = await api("/api/snapshots");
  if (!snapshots.length) { main.append(h("p", { id: "snapshots-none" }, t("noSnapshots"))); return; }
  main.append(h("table", {}, h("tbody", {}, snapshots.map((s) => {
    const parts = h("select", { "aria-label": "parts" }, h("option", { value: "files" }, "files"), h("option", { value: "all" }, "all"));
    return h("tr", {}, h("td", { class: "file" }, s.id), h("td", {}, s.created), h("td", {}, `${s.kind} ${s.label || ""}`), h("td", {}, `${s.files}`),
      h("td", {}, parts, " ", h("button", { type: "button", class: "danger", onclick: async () => {
        if (!confirm(t("confirmRollback", { id: s.id, parts: parts.value }))) return;
        try {
          const done = await api("/api/rollback", { id: s.id, parts: parts.value });
          say(Object.entries(done).map(([k, v]) => `${k}: ${Array.isArray(v) ? v.length : v}`).join(" · "));
          await load(); show("snapshots");
        } catch (e) { say(e.message, true); }
      } }, t("rollback"))));
  }))));
}

async function dreamPage(main) {
  const { runs } = await api("/api/dream");
  if (!runs.length) { main.append(h("p", { id: "dream-none" }, t("noDreams"))); return; }
  const shown = h("pre", { id: "dream-report", class: "report" });
  const head = h("thead", {}, h("tr", {}, ["run", "started", "modeStatus", "changesProposals", "model", "actions"].map((k) => h("th", { scope: "col" }, t(k)))));
  main.append(h("table", { id: "dream-runs" }, head, h("tbody", {}, runs.map((r) => {
    const actions = [h("button", { type: "button", onclick: async () => {
      try { shown.textContent = (await api(`/api/dream/run?id=${encodeURIComponent(r.id)}`)).report; } catch (e) { say(e.message, true); }
    } }, t("report"))];
    if (r.mode === "report" && r.proposals && !r.applied_by) {
      actions.push(" ", h("button", { type: "button", onclick: async () => {
        if (!confirm(t("confirmApply", { id: r.id, n: r.proposals }))) return;
        try { const done = await api("/api/dream/apply", { id: r.id }); say(`${done.id}: ${done.status} · ${done.changes.join(", ") || "—"}`); show("dream"); } catch (e) { say(e.message, true); }
      } }, t("applyProposals")));
    }
    // A run is rolled back once (`rolled_back`); one whose rollback left conflicts may be again.
    if (r.changes && !r.rolled_back) {
      const parts = h("select", { "aria-label": "parts" }, h("option", { value: "files" }, "files"), h("option", { value: "all" }, "all"));
      actions.push(" ", parts, " ", h("button", { type: "button", class: "danger", onclick: async () => {
        if (!confirm(t("confirmDreamRollback", { id: r.id, parts: parts.value }))) return;
        try {
          const done = await api("/api/dream/rollback", { id: r.id, parts: parts.value });
          say(["restored", "archived", "retired", "conflicts"].filter((k) => (done[k] || []).length).map((k) => `${k}: ${done[k].join(", ")}`).join(" · ") || "—");
          await load(); show("dream");
        } catch (e) { say(e.message, true); }
      } }, t("rollback")));
    }
    return h("tr", {}, h("td", { class: "file" }, r.id), h("td", {}, r.started || ""), h("td", {}, `${r.mode} · ${r.status}${r.stop ? " (" + r.stop + ")" : ""}`),
      h("td", {}, `${r.changes} / ${r.proposals}`), h("td", {}, r.model || ""), h("td", {}, ...actions));
  }))), shown);
}

async function conflictsPage(main) {
  const { conflicts } = await api("/api/conflicts");
  if (!conflicts.length) { main.append(h("p", {}, t("noConflicts"))); return; }
  for (const c of conflicts) {
    const resolve = async (keep) => { try { await api("/api/conflicts/resolve", { id: c.id, keep }); await load(); show("conflicts"); } catch (e) { say(e.message, true); } };
    // Each kind says how it ends, and its buttons say what they do to the file.
    const [disk, proposed] = { duplicate: ["keepExisting", "replaceExisting"], deleted: ["leaveDeleted", "writeBack"],
      unapplied: ["close", null] }[c.kind] || ["keepDisk", "keepProposed"];
    const buttons = [h("button", { type: "button", "data-keep": "disk", onclick: () => resolve("disk") }, t(disk))];
    if (proposed) buttons.push(h("button", { type: "button", "data-keep": "proposed", onclick: () => resolve("proposed") }, t(proposed)));
    main.append(h("h3", {}, h("span", { class: "file" }, c.file), ` · ${c.id} · ${c.writer || ""} · ${c.reason || ""}`),
      h("p", { class: "kind", "data-kind": c.kind }, t(`kind_${c.kind}`)),
      h("div", { class: "compare" }, h("div", {}, h("h4", {}, t("diskThen")), h("pre", { class: "raw" }, c.disk ?? "")),
        h("div", {}, h("h4", {}, t("yours")), h("pre", { class: "raw" }, c.proposed ?? ""))),
      h("div", { class: "actions" }, ...buttons));
  }
}

// Every memory a star: colour = type, size = bytes, brightness = how recently it was used,
// archived ones dim. Drawn when the data or the window size changes, never in a loop.
function starsPage(main) {
  const canvas = h("canvas", { id: "stars", role: "img", "aria-label": t("stars") });
  const tip = h("div", { id: "star-tip" });
  main.append(canvas, tip, h("h3", {}, t("timeline")), timeline());
  const stars = [];
  const hash = (s) => { let x = 2166136261; for (const c of s) x = Math.imul(x ^ c.codePointAt(0), 16777619) >>> 0; return x; };
  function draw() {
    const ratio = window.devicePixelRatio || 1;
    const width = canvas.clientWidth, height = canvas.clientHeight;
    canvas.width = width * ratio; canvas.height = height * ratio;
    const ctx = canvas.getContext("2d"); ctx.scale(ratio, ratio);
    ctx.fillStyle = "#0d1420"; ctx.fillRect(0, 0, width, height);
    stars.length = 0;
    for (const m of state.data.memories) {
      const seed = hash(m.file);
      const x = 20 + (seed % 10007) / 10007 * (width - 40), y = 20 + ((seed >>> 13) % 10009) / 10009 * (height - 40);
      const r = Math.min(16, 3 + Math.sqrt(m.bytes) / 6);
      // Never used: half bright; used: brighter the more recently, fading over six months.
      const fresh = m.idle_days == null ? 0.5 : Math.max(0.35, 1 - m.idle_days / 180);
      const alpha = m.archived ? 0.18 : fresh;
      const colour = `rgba(${RGB[m.type] || "160,160,150"},${alpha})`;
      ctx.beginPath(); ctx.arc(x, y, r, 0, Math.PI * 2);
      ctx.shadowColor = colour; ctx.shadowBlur = m.archived ? 0 : r * 2;
      ctx.fillStyle = colour; ctx.fill();
      stars.push({ x, y, r: r + 3, m });
    }
  }
  const at = (e) => { const box = canvas.getBoundingClientRect(); const x = e.clientX - box.left, y = e.clientY - box.top; return stars.find((s) => (s.x - x) ** 2 + (s.y - y) ** 2 <= s.r ** 2); };
  canvas.addEventListener("mousemove", (e) => {
    const star = at(e);
    tip.style.display = star ? "block" : "none";
    if (star) { tip.textContent = `${star.m.file}${star.m.idle_days != null ? " · " + t("idle", { d: star.m.idle_days }) : ""}`; tip.style.left = `${e.clientX + 12}px`; tip.style.top = `${e.clientY + 12}px`; }
  });
  canvas.addEventListener("click", (e) => { const star = at(e); if (star) { show("memories"); viewPage(document.getElementById("main"), star.m); } });
  draw();
  const redraw = () => { if (state.tab === "stars" && document.body.contains(canvas)) draw(); else window.removeEventListener("resize", redraw); };
  window.addEventListener("resize", redraw);
  starsPage.draw = draw;
  starsPage.stars = stars; // where each star is drawn: for the page's tests
}

function timeline() {
  const months = {};
  for (const m of state.data.memories) if (m.updated) { const key = String(m.updated).slice(0, 7); months[key] = (months[key] || 0) + 1; }
  const keys = Object.keys(months).sort();
  const top = Math.max(1, ...Object.values(months));
  return h("div", { class: "timeline", role: "img", "aria-label": t("timeline") },
    keys.map((k) => h("span", { title: `${k}: ${months[k]}`, style: `height:${(months[k] / top) * 100}%` })));
}

document.title = ZH ? "sagemem 记忆" : "sagemem memories";
document.documentElement.lang = ZH ? "zh" : "en";
const tabs = [...document.querySelectorAll("#tabs button")];
for (const button of tabs) {
  button.textContent = t(button.dataset.label);
  button.addEventListener("click", () => show(button.dataset.tab));
  // Arrow keys move between tabs, as in any tab list.
  button.addEventListener("keydown", (e) => {
    const step = { ArrowRight: 1, ArrowLeft: -1 }[e.key];
    if (!step) return;
    const next = tabs[(tabs.indexOf(button) + step + tabs.length) % tabs.length];
    next.focus(); show(next.dataset.tab);
  });
}
for (const badge of document.querySelectorAll(".badge")) badge.addEventListener("click", () => show(badge.dataset.go));
load().then(() => show("memories")).catch((e) => say(e.message, true));
