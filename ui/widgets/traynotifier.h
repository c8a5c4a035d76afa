#pragma once

#include "session/health.h"

#include <QElapsedTimer>
#include <QMap>
#include <QObject>

class QMenu;
class QSystemTrayIcon;

namespace once::ui {

class HealthMonitor;

// The console in the system tray: an icon whose tooltip says how the store is, and a
// desktop notification when an alert starts or clears, when dead letters grow, and when
// events land in doubt. Clicking a notification asks for the page it is about. Which
// kinds notify is remembered in Settings; the noisy ones are off until chosen.
//
// What was already wrong when a store opened is not announced: the window shows it.
class TrayNotifier final : public QObject
{
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(TrayNotifier)

public:
    enum class Kind
    {
        PartnerDown,
        PartnerFailing,
        NoWorker,
        OldestWaiting,
        InDoubt,
        DeadLetters
    };
    Q_ENUM(Kind)
    enum class Target
    {
        Overview,
        Worker,
        DeadLetters,
        InDoubt
    };
    Q_ENUM(Target)

    struct Notification
    {
        Kind kind = Kind::PartnerDown;
        bool cleared = false; // the alert ended
        QString title;
        QString text;
        Target target = Target::Overview;
    };

    static const QList<Kind> &kinds();
    // The name in Settings ("partnerDown"), the words in the Settings dialog, and whether
    // a kind notifies until the user says otherwise.
    static QString settingsName(Kind kind);
    static QString label(Kind kind);
    static bool onByDefault(Kind kind);

    TrayNotifier(HealthMonitor *health, QObject *parent = nullptr);
    ~TrayNotifier() override;

    QSystemTrayIcon *trayIcon() const { return m_tray; }
    // Shows or hides the icon as Settings say (after the Settings dialog).
    void applySettings();
    // The last notification raised; what a click on it opens.
    Notification lastNotification() const { return m_last; }

signals:
    void notified(const once::ui::TrayNotifier::Notification &notification);
    void pageRequested(once::ui::TrayNotifier::Target target);
    void showWindowRequested();
    void quitRequested();

private:
    void onHealthChanged();
    void raise(const Notification &notification);
    void updateToolTip();

    HealthMonitor *m_health = nullptr;
    QSystemTrayIcon *m_tray = nullptr;
    QMenu *m_menu = nullptr;
    bool m_primed = false; // the first answer of a store is what was there already
    QMap<HealthAlert::Kind, HealthAlert> m_active;
    qint64 m_deadNoticed = 0;    // dead letters when last announced (or primed)
    qint64 m_inDoubtNoticed = 0; // events in doubt likewise
    QElapsedTimer m_sinceDeadNotice;
    Notification m_last;
};

} // namespace once::ui

Q_DECLARE_METATYPE(once::ui::TrayNotifier::Notification)
