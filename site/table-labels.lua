-- Every body cell of a table carries its column's header as data-label (for example
-- <td data-label="beyond the training length">). On a phone a table too wide for the screen is then
-- shown as one block per row, each value after its column's name (site/table-stack.html adds the
-- class table-stacked, site/book.css draws it), so no column is hidden behind a sideways scroll.
local function header_texts(tbl)
  local rows = tbl.head and tbl.head.rows or {}
  if #rows == 0 then
    return nil
  end
  local texts = {}
  local column = 1
  for _, cell in ipairs(rows[#rows].cells) do
    local text = pandoc.utils.stringify(cell.contents):gsub("%s+", " "):gsub("^ ", ""):gsub(" $", "")
    for _ = 1, (cell.col_span or 1) do
      texts[column] = text
      column = column + 1
    end
  end
  return texts
end

function Table(tbl)
  local texts = header_texts(tbl)
  if texts == nil then
    return nil
  end
  for _, body in ipairs(tbl.bodies) do
    for _, row in ipairs(body.body) do
      local column = 1
      for _, cell in ipairs(row.cells) do
        if texts[column] and texts[column] ~= "" then
          cell.attr.attributes["data-label"] = texts[column]
        end
        column = column + (cell.col_span or 1)
      end
    end
  end
  return tbl
end
