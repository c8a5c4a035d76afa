#include "dialogs/settingsdialog.h"

#include "session/storesession.h"
#include "settings/settings.h"
#include "widgets/traynotifier.h"

#include <QBoxLayout>
#include <QCheckBox>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QLabel>
#include <QSpinBox>
#include <QSystemTrayIcon>

namespace once::ui {

namespace {

// The spin box's own name for a rule: what the tests and accessibility tools find it by.
QString objectNameOf(AlertRule rule)
{
    switch (rule) {
    case AlertRule::PartnerDown:
        return QStringLiteral("partnerDownSeconds");
    case AlertRule::PartnerFailingSends:
        return QStringLiteral("partnerFailingSends");
    case AlertRule::OldestReady:
        return QStringLiteral("oldestReadySeconds");
    default:
        return QStringLiteral("alert-") + alertRuleName(rule);
    }
}

QString labelOf(AlertRule rule)
{
    switch (rule) {
    case AlertRule::PartnerDown:
        return SettingsDialog::tr("Call a partner down when it failed every send for");
    case AlertRule::PartnerFailingSends:
        return SettingsDialog::tr("Alert when the partner failed this many sends in 5 minutes, none applied");
    case AlertRule::NoWorker:
        return SettingsDialog::tr("Alert when no worker runs while messages wait, after");
    case AlertRule::OldestReady:
        return SettingsDialog::tr("Alert when the oldest ready message is older than");
    case AlertRule::LatenessP95:
        return SettingsDialog::tr("Alert when the last hour's lateness (95th percentile) is above");
    case AlertRule::InDoubt:
        return SettingsDialog::tr("Alert when an event has been in doubt for");
    case AlertRule::DeadLetters:
        return SettingsDialog::tr("Alert when this many reminders died in 15 minutes");
    case AlertRule::StoreFailing:
        return SettingsDialog::tr("Alert when the store has not answered for");
    case AlertRule::RemindEvery:
        return SettingsDialog::tr("Notify an open, unacknowledged incident again every");
    }
    return {};
}

} // namespace

SettingsDialog::SettingsDialog(StoreSession *session, const AlertThresholds &thresholds, QWidget *parent)
    : QDialog(parent), m_session(session), m_thresholds(thresholds)
{
    setWindowTitle(tr("Settings"));
    Settings settings;

    auto *alerts = new QGroupBox(tr("Alerts on this store (every console and once watch on it)"));
    alerts->setObjectName(QStringLiteral("storeAlerts"));
    auto *alertForm = new QFormLayout(alerts);
    for (const AlertRuleInfo &info : alertRules()) {
        auto *value = new QSpinBox;
        value->setObjectName(objectNameOf(info.rule));
        if (info.isDuration) {
            value->setRange(info.rule == AlertRule::RemindEvery ? 60 : 0, 7 * 24 * 3600);
            value->setSuffix(tr(" s"));
            value->setValue(int(thresholds.value(info.rule) / 1000));
        } else {
            value->setRange(1, 1000000);
            value->setValue(int(thresholds.value(info.rule)));
        }
        const auto row = thresholds.rowFor(info.rule, QString());
        value->setToolTip(QString::fromLatin1(info.meaning) + QLatin1Char('\n') +
                          (row ? tr("Set by %1; once alerts set %2 VALUE changes it too.").arg(row->setBy, alertRuleName(info.rule))
                               : tr("The default; once alerts set %1 VALUE changes it too.").arg(alertRuleName(info.rule))));
        value->setEnabled(session != nullptr);
        alertForm->addRow(labelOf(info.rule), value);
        m_alertValues.insert(info.rule, value);
    }
    if (!session)
        alertForm->addRow(new QLabel(tr("Open a store to change its alerts.")));

    m_idempotencyWindow = new QSpinBox;
    m_idempotencyWindow->setRange(1, 24 * 90);
    m_idempotencyWindow->setSuffix(tr(" h"));
    m_idempotencyWindow->setValue(settings.idempotencyWindowHours());
    m_redriveRate = new QSpinBox;
    m_redriveRate->setRange(1, 100000);
    m_redriveRate->setSuffix(tr(" /s"));
    m_redriveRate->setValue(settings.redriveRate());

    auto *form = new QFormLayout;
    form->addRow(tr("Partner keeps idempotency keys for"), m_idempotencyWindow);
    form->addRow(tr("Default redrive rate"), m_redriveRate);
    auto *buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
    connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);

    auto *notifications = new QGroupBox(tr("Desktop notifications"));
    auto *notificationsLayout = new QVBoxLayout(notifications);
    m_showInTray = new QCheckBox(tr("Show the console in the system tray and notify when:"));
    m_showInTray->setObjectName(QStringLiteral("showInTray"));
    m_showInTray->setChecked(settings.showInTray());
    if (!QSystemTrayIcon::isSystemTrayAvailable())
        m_showInTray->setToolTip(
            tr("This desktop has no system tray now; the setting applies where there is one."));
    notificationsLayout->addWidget(m_showInTray);
    for (const TrayNotifier::Kind kind : TrayNotifier::kinds()) {
        const QString name = TrayNotifier::settingsName(kind);
        auto *box = new QCheckBox(TrayNotifier::label(kind));
        box->setObjectName(QStringLiteral("notify-") + name);
        box->setChecked(settings.notifies(name, TrayNotifier::onByDefault(kind)));
        box->setEnabled(m_showInTray->isChecked());
        connect(m_showInTray, &QCheckBox::toggled, box, &QWidget::setEnabled);
        auto *indented = new QHBoxLayout;
        indented->addSpacing(20);
        indented->addWidget(box);
        notificationsLayout->addLayout(indented);
        m_notifies.insert(name, box);
    }

    auto *layout = new QVBoxLayout(this);
    layout->addWidget(alerts);
    layout->addLayout(form);
    layout->addWidget(notifications);
    layout->addWidget(buttons);
}

void SettingsDialog::accept()
{
    // Only what changed, each one audited in the operator's name.
    if (m_session) {
        for (auto it = m_alertValues.cbegin(); it != m_alertValues.cend(); ++it) {
            const qint64 value = alertRuleInfo(it.key()).isDuration ? qint64(it.value()->value()) * 1000
                                                                    : qint64(it.value()->value());
            if (value != m_thresholds.value(it.key()))
                m_session->setAlertThreshold(it.key(), QString(), value);
        }
    }
    Settings settings;
    settings.setIdempotencyWindowHours(m_idempotencyWindow->value());
    settings.setRedriveRate(m_redriveRate->value());
    settings.setShowInTray(m_showInTray->isChecked());
    for (auto it = m_notifies.cbegin(); it != m_notifies.cend(); ++it)
        settings.setNotifies(it.key(), it.value()->isChecked());
    QDialog::accept();
}

} // namespace once::ui
