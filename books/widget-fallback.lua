--[[
The book as an EPUB or a PDF (tools/build_books.sh, _quarto-books.yml); on the website's HTML this
filter does nothing, so the site's pages are unchanged. It runs after Quarto's own filters
(`at: post-render`), on the whole book as one document.

* Each interactive figure, a notebook's Markdown `<div class="attn-widget" data-widget="chNN-name">`,
  runs only in a browser: the div becomes one sentence in the edition's language that points to the
  same chapter on the website. The static figures the widget redraws are the chapter's own figures.
  The website's address is the metadata key `book-site-url` (_quarto-books.yml); the chapter's page
  is <book-site-url>/<lang>/chapters/<lang>/<stem>.html, as tools/build_site.sh lays the site out.
* A link to another chapter's file (`03-masking.ipynb`, `glossary.qmd#sec-x`), which the website
  resolves to its page, points into the book: to its anchor, or to the chapter's first heading.
* The Japanese PDF reads 「3.2 節」「第 3 章」 where Quarto writes 「セクション 3.2」「チャプター 3」.
* EPUB is XHTML: a raw `<br>` (notebook tables' headers) is written `<br />`, and a figure's
  alternative text stays on its <img>, not on the figure's <div> where XHTML forbids it.
* EPUB math is MathML: pandoc's texmath cannot parse \Bigl( ... \Bigr) inside an aligned block and
  leaves the whole equation as TeX; \Big( ... \Big) is the same size and converts. Its MathML for
  \big/ (an <mi> with maxsize) and \tfrac (<mfrac displaystyle>) is not valid EPUB 3 MathML, so they
  are written / and \frac.
]]

local TEXT = {
  en = { before = "This interactive figure runs on the book's website: ", after = "." },
  ja = { before = "この対話的な図は本書のウェブサイトで動きます：", after = "" },
}

local function chapter_files(meta)
  -- The book's files in order, from the profile's book.chapters and book.appendices.
  local files = {}
  local book = meta.book or {}
  for _, key in ipairs({ "chapters", "appendices" }) do
    for _, item in ipairs(book[key] or {}) do
      local href = item.href and pandoc.utils.stringify(item.href) or pandoc.utils.stringify(item)
      table.insert(files, href)
    end
  end
  return files
end

local function stem(path)
  return path:match("([^/\\]+)%.ipynb$") or path:match("([^/\\]+)%.qmd$")
end

function Pandoc(doc)
  if not (quarto.doc.is_format("epub") or quarto.doc.is_format("latex") or quarto.doc.is_format("pdf")) then
    return nil
  end
  local epub = quarto.doc.is_format("epub")
  local site = doc.meta["book-site-url"] and pandoc.utils.stringify(doc.meta["book-site-url"]) or ""
  site = site:gsub("/$", "")
  local lang = doc.meta.lang and pandoc.utils.stringify(doc.meta.lang):sub(1, 2) or "en"
  local text = TEXT[lang] or TEXT.en

  -- stem -> the id of the chapter's first level-1 heading, the files and headings taken in order.
  local files = chapter_files(doc.meta)
  local ids, number_to_stem, i = {}, {}, 0
  for _, block in ipairs(doc.blocks) do
    if block.t == "Header" and block.level == 1 then
      i = i + 1
      if files[i] and stem(files[i]) then ids[stem(files[i])] = block.identifier end
    end
  end
  for _, file in ipairs(files) do
    local s = stem(file)
    local n = s and s:match("^(%d%d)%-")
    if n then number_to_stem[n] = s end
  end

  local filters = {
    Div = function(div)
      if epub and div.attributes.alt then div.attributes.alt = nil end
      if not div.classes:includes("attn-widget") then return epub and div or nil end
      local n = (div.attributes["data-widget"] or ""):match("^ch(%d%d)")
      local page = site .. "/" .. lang .. "/"
      if n and number_to_stem[n] then
        page = page .. "chapters/" .. lang .. "/" .. number_to_stem[n] .. ".html"
      end
      -- The address as its own text (class uri): LaTeX writes \url{}, which breaks at a slash.
      local inlines = pandoc.Inlines({ pandoc.Str(text.before),
                                       pandoc.Link(pandoc.Inlines({ pandoc.Str(page) }), page, "",
                                                   pandoc.Attr("", { "uri" })) })
      if text.after ~= "" then inlines:insert(pandoc.Str(text.after)) end
      return pandoc.Div({ pandoc.Para(inlines) }, pandoc.Attr("", { "widget-fallback" }))
    end,
    Link = function(link)
      if link.target:match("^%a[%w+.-]*:") then return nil end  -- an absolute url
      local path, fragment = link.target:match("^([^#]*)(#?.*)$")
      local s = stem(path)
      if s == nil then return nil end
      if fragment ~= "" then link.target = fragment
      elseif ids[s] then link.target = "#" .. ids[s]
      else return nil end
      return link
    end,
  }
  if lang == "ja" and not epub then
    -- 「セクション~\ref{sec-x}」 -> 「\ref{sec-x}~節」, 「チャプター~\ref{}」 -> 「第~\ref{}~章」, as the website
    -- reads (tools/japanese_xrefs.py there, tools/books.py in the EPUB). Quarto writes the prefix as a
    -- Str ending in the loan word and a no-break space, before the \ref.
    local NBSP = "\u{00a0}"
    filters.Inlines = function(inlines)
      local out, changed = pandoc.Inlines({}), false
      local i = 1
      while i <= #inlines do
        local el, nxt = inlines[i], inlines[i + 1]
        local before, word = nil, nil
        if el.t == "Str" then
          before, word = el.text:match("^(.-)(セクション)" .. NBSP .. "$")
          if not word then before, word = el.text:match("^(.-)(チャプター)" .. NBSP .. "$") end
        end
        if word and nxt and nxt.t == "RawInline" and nxt.format:match("tex") and nxt.text:match("^\\ref%b{}$") then
          if before ~= "" then out:insert(pandoc.Str(before)) end
          if word == "セクション" then
            out:insert(nxt); out:insert(pandoc.Str(NBSP .. "節"))
          else
            out:insert(pandoc.Str("第" .. NBSP)); out:insert(nxt); out:insert(pandoc.Str(NBSP .. "章"))
          end
          changed, i = true, i + 2
        else
          out:insert(el); i = i + 1
        end
      end
      if changed then return out end
    end
  end
  if not epub then
    -- Inline code may break after . _ / ( , = : a long identifier in running text, Japanese above all
    -- (no spaces), otherwise runs into the margin.
    local ESCAPE = { ["\\"] = "\\textbackslash{}", ["{"] = "\\{", ["}"] = "\\}", ["$"] = "\\$", ["&"] = "\\&",
                     ["#"] = "\\#", ["^"] = "\\^{}", ["_"] = "\\_", ["%"] = "\\%", ["~"] = "\\textasciitilde{}",
                     ["'"] = "\\textquotesingle{}", ["`"] = "\\textasciigrave{}", ["<"] = "\\textless{}",
                     [">"] = "\\textgreater{}", ["-"] = "-{}", [" "] = "\\ " }
    local BREAK_AFTER = { ["."] = true, ["_"] = true, ["/"] = true, ["("] = true, [","] = true, ["="] = true }
    filters.Code = function(code)
      local out = {}
      for _, point in utf8.codes(code.text) do
        local c = utf8.char(point)
        out[#out + 1] = ESCAPE[c] or c
        if BREAK_AFTER[c] then out[#out + 1] = "\\allowbreak{}" end
      end
      return pandoc.RawInline("latex", "\\texttt{" .. table.concat(out) .. "}")
    end
  end
  if epub then
    filters.Math = function(math)
      local fixed = math.text:gsub("\\Big[lr](%A)", "\\Big%1"):gsub("\\big/", "/"):gsub("\\tfrac", "\\frac")
      if fixed ~= math.text then math.text = fixed; return math end
    end
    local function xhtml(raw)
      if raw.format == "html" then
        local fixed = raw.text:gsub("<br%s*>", "<br />")
        if fixed ~= raw.text then raw.text = fixed; return raw end
      end
    end
    filters.RawInline = xhtml
    filters.RawBlock = xhtml
  end
  return doc:walk(filters)
end
