-- A cell that calls exercises.check gets the class "exercise-check" (site/book.css wraps its output):
-- the check prints sentences, and on a phone the end of a sentence hidden behind a scroll bar is lost,
-- while other outputs (arrays, tables) keep their columns and scroll.
function Div(el)
  if not el.classes:includes("cell") then
    return nil
  end
  local checks = false
  pandoc.walk_block(el, {
    CodeBlock = function(block)
      if block.text:find("exercises%.check%(") then
        checks = true
      end
    end,
  })
  if checks then
    el.classes:insert("exercise-check")
    return el
  end
end
