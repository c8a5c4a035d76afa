#pragma once

#include <QWidget>

namespace once::ui {

class StoreSession;

// One screen of the console. The main window hands every page the session of the open
// store (or nullptr while none is open) and asks it to refresh on F5 and on a timer.
class Page : public QWidget
{
    Q_OBJECT

public:
    using QWidget::QWidget;

    virtual QString title() const = 0;
    virtual void setSession(StoreSession *session) = 0;
    // Reloads what the page shows; cheap to call often (a page with nothing visible may skip).
    virtual void refresh() = 0;
    // Ctrl+F: put the cursor in the page's search box, if it has one.
    virtual void focusSearch() {}
};

} // namespace once::ui
