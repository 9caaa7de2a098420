--[[
No space around a citation's full-width parentheses in the Japanese edition.

The Japanese edition's citation style (site/book-ja.csl, `csl:` in _quarto-ja.yml) puts citations in
full-width parentheses, 「（Haviv et al. 2022）」. Full-width punctuation carries its own spacing, so
the space an author types before or after a citation ("報告されています [@haviv2022]。",
"AFT [@zhai2021] は") must go: 「報告されています（Haviv et al. 2022）。」, 「AFT（Zhai et al. 2021）は」.
Quarto runs citeproc after every filter, so this filter sees the citations unrendered:

* it drops a space or line break next to a citation in parentheses (NormalCitation, "[@key]", and
  SuppressAuthor, "Zhai ら [-@key]");
* a narrative citation ("@key は") would come out as 「Ainslie et al. （2023） は」, with a space that
  citeproc puts between the authors and the parenthesis; it becomes the authors' names as text
  (rendered here by citeproc with the same style) followed by the year in parentheses, a
  SuppressAuthor citation that keeps the link: 「Ainslie et al.（2023）は」.

The Japanese profile alone runs it (`filters:` in _quarto-ja.yml); tests/site/test_site_citations.py runs
it through Pandoc with the style, and tools/sitecheck.py (check_citations) checks the built pages of
both editions.
]]

local meta
local in_bibliography = {}  -- the keys of the bibliography: "@fig-x", "[@sec-y]" are cross-references

local function cites_the_bibliography(el)
  if el == nil or el.t ~= "Cite" then return false end
  for _, citation in ipairs(el.citations) do
    if not in_bibliography[citation.id] then return false end
  end
  return true
end

local function parenthetical(el)
  return cites_the_bibliography(el) and el.citations[1].mode ~= "AuthorInText"
end

local OPEN = "（"

-- The authors of a narrative citation as citeproc writes them ("Ainslie et al."), or nil.
local function authors(cite)
  local doc = pandoc.Pandoc({pandoc.Plain{cite:clone()}}, meta)
  doc.meta["suppress-bibliography"] = true
  doc.meta["link-citations"] = false
  local ok, rendered = pcall(pandoc.utils.citeproc, doc)
  if not ok then return nil end
  local found
  rendered:walk{Cite = function(c) found = found or c.content end}
  if found == nil then return nil end
  local names = pandoc.Inlines{}
  for _, inline in ipairs(found) do
    if inline.t == "Str" and inline.text:sub(1, #OPEN) == OPEN then
      while #names > 0 and (names[#names].t == "Space" or names[#names].t == "SoftBreak") do
        names:remove(#names)
      end
      return #names > 0 and names or nil
    end
    names:insert(inline)
  end
  return nil  -- no parenthesis: leave the citation as it is
end

local function narrative_to_parenthetical(inlines)
  for i = #inlines, 1, -1 do
    local el = inlines[i]
    if cites_the_bibliography(el) and #el.citations == 1 and el.citations[1].mode == "AuthorInText" then
      local names = authors(el)
      if names ~= nil then
        local year = el:clone()
        year.citations[1].mode = "SuppressAuthor"
        inlines:remove(i)
        inlines:insert(i, year)
        for k = #names, 1, -1 do inlines:insert(i, names[k]) end
      end
    end
  end
  return inlines
end

local function drop_spaces(inlines)
  for i = #inlines, 1, -1 do
    local el = inlines[i]
    if (el.t == "Space" or el.t == "SoftBreak")
        and (parenthetical(inlines[i - 1]) or parenthetical(inlines[i + 1])) then
      inlines:remove(i)
    end
  end
  return inlines
end

function Pandoc(doc)
  meta = doc.meta
  for _, reference in ipairs(pandoc.utils.references(doc)) do
    in_bibliography[reference.id] = true
  end
  return doc:walk{Inlines = function(inlines) return drop_spaces(narrative_to_parenthetical(inlines)) end}
end
