#pragma once

#include <QWidget>

namespace once::ui {

class StoreSession;

// One screen of the console. The main window hands every page the session of the open
// store (or nullptr while none is open) and asks it to refresh on F5, when the store
// announces a change, and on a timer.
class Page : public QWidget
{
    Q_OBJECT

public:
    // Polling while the store announces its changes (PostgreSQL) only catches what no
    // notification tells: time passing, a connection that lost its notifications.
    static constexpr int PollIntervalMs = 2000;
    static constexpr int LivePollIntervalMs = 10000;

    using QWidget::QWidget;

    virtual QString title() const = 0;
    virtual void setSession(StoreSession *session) = 0;
    // Reloads what the page shows; cheap to call often (a page with nothing visible may skip).
    virtual void refresh() = 0;
    // How long the window lets this page go without a refresh before it polls.
    virtual int refreshIntervalMs(bool liveUpdates) const
    {
        return liveUpdates ? LivePollIntervalMs : PollIntervalMs;
    }
    // Ctrl+F: put the cursor in the page's search box, if it has one.
    virtual void focusSearch() {}
};

} // namespace once::ui
